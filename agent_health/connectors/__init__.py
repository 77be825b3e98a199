"""Agent connectors: how a test's `agent.run()` reaches an agent (demo, http, agui, subprocess,
python, claude, and installed packages' kinds through the `agent_health.connectors` entry point
group; docs/extending.md). Each kind is one `Connector` subclass, looked up in `REGISTRY`.

Names load on first use (a run imports only the connectors it uses)."""

from typing import TYPE_CHECKING

from agent_health.lazy import lazy_names

if TYPE_CHECKING:
    from agent_health.connectors.base import AgentRuntime, Connector, connector_class
    from agent_health.connectors.registry import REGISTRY

_LAZY = {
    **dict.fromkeys(["AgentRuntime", "Connector", "connector_class"], "agent_health.connectors.base"),
    "REGISTRY": "agent_health.connectors.registry",
}

__getattr__ = lazy_names(__name__, _LAZY)

__all__ = ["REGISTRY", "AgentRuntime", "Connector", "connector_class"]
