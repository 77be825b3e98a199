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
        # framework agents named directly (docs/connectors.md#framework-agents); each module imports its framework
        "pydantic_ai": "agent_health.connectors.frameworks.pydantic_ai:PydanticAIConnector",
        "langgraph": "agent_health.connectors.frameworks.langchain:LangChainConnector",
        "langchain": "agent_health.connectors.frameworks.langchain:LangChainConnector",
        "openai_agents": "agent_health.connectors.frameworks.openai_agents:OpenAIAgentsConnector",
    },
)

# The package extra a built-in kind's framework comes with, named when it is not installed.
EXTRAS = {
    "pydantic_ai": "pydantic-ai",
    "langgraph": "langgraph",
    "langchain": "langgraph",
    "openai_agents": "openai-agents",
}

__all__ = ["EXTRAS", "REGISTRY"]
