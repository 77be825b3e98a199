"""Reporters: what a run writes as it goes (summary, JSON, JSON lines, JUnit, TAP, GitHub, HTML, and
installed packages' kinds through the `agent_health.reporters` entry point group). The contract is
`Reporter` (reporters/base.py); kinds are looked up in `REGISTRY`.

Names load on first use (a run imports only the reporters it writes)."""

from typing import TYPE_CHECKING

from agent_health.lazy import lazy_names

if TYPE_CHECKING:
    from agent_health.reporters.base import CallbackReporter, OutputClosed, Reporter, ReportError, closed_output
    from agent_health.reporters.registry import REGISTRY

_LAZY = {
    **dict.fromkeys(
        ["CallbackReporter", "OutputClosed", "ReportError", "Reporter", "closed_output"], "agent_health.reporters.base"
    ),
    "REGISTRY": "agent_health.reporters.registry",
}

__getattr__ = lazy_names(__name__, _LAZY)

__all__ = ["REGISTRY", "CallbackReporter", "OutputClosed", "ReportError", "Reporter", "closed_output"]
