"""The connector registry: an agent's `connector` names a kind here.

A kind's target is a `connectors.base.Connector` subclass, built as `cls(resolved_agent)`.
Third-party kinds come from the `agent_health.connectors` entry points.
"""

from agent_health.registry import Registry

REGISTRY = Registry(
    "connector",
    "agent_health.connectors",
    {
        "demo": "agent_health.connectors.demo:DemoConnector",
        "http": "agent_health.connectors.http:HttpConnector",
        "agui": "agent_health.connectors.agui:AguiConnector",
        "subprocess": "agent_health.connectors.subprocess:SubprocessConnector",
        "python": "agent_health.connectors.python:PythonConnector",
        "claude": "agent_health.connectors.claude:ClaudeConnector",
    },
)

__all__ = ["REGISTRY"]
