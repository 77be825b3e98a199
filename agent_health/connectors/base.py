"""The connector contract: each connector turns one `agent.run()` into one `RunResult`.

A connector is built from a resolved agent (settings with the version's overrides applied) and
must raise `AgentError` naming the agent and endpoint on failure; the runtime wraps anything else.
"""

from __future__ import annotations

import abc
import importlib
import os
import time
import uuid
from typing import Any, Callable, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from agent_health.model import RunResult
from agent_health.sdk.errors import AgentError, ConfigError


class AgentRequest(BaseModel):
    """Everything one agent invocation receives."""

    model_config = ConfigDict(frozen=True)

    prompt: str
    context: tuple[dict[str, Any], ...] = ()
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for the agent.")
    files: dict[str, Any] = Field(default_factory=dict, description="Files to provision, name -> content.")
    provisioned: dict[str, Any] = Field(default_factory=dict, description="Structured values for the payload.")
    test_id: str | None = None
    timeout_s: float | None = None
    run_id: str = ""
    trace_id: str = ""
    span_id: str = ""

    @property
    def traceparent(self) -> str:
        """W3C trace context header value for this run."""
        return f"00-{self.trace_id}-{self.span_id}-01"


class ResolvedAgent(BaseModel):
    """An agent at one version: its connector name and merged settings."""

    model_config = ConfigDict(frozen=True)

    key: str
    version: str
    connector: str
    settings: dict[str, Any] = Field(default_factory=dict)
    traces: bool = Field(False, description="Whether this agent's runs have traces.")

    @property
    def ref(self) -> str:
        return f"{self.key}@{self.version}"


class Connector(abc.ABC):
    """Base class of connectors."""

    name: ClassVar[str] = ""

    def __init__(self, agent: ResolvedAgent):
        self.agent = agent

    @property
    def endpoint(self) -> str:
        """Where this connector sends requests, for error messages."""
        return str(self.agent.settings.get("endpoint") or self.agent.settings.get("command") or self.name)

    @abc.abstractmethod
    async def run(self, request: AgentRequest) -> RunResult:
        """Invoke the agent once."""

    async def aclose(self) -> None:
        """Release pooled connections."""


# Lazily imported so the CLI does not pay for connectors it does not use.
CONNECTORS: dict[str, str] = {
    "demo": "agent_health.connectors.demo:DemoConnector",
    "http": "agent_health.connectors.http:HttpConnector",
    "agui": "agent_health.connectors.agui:AguiConnector",
    "subprocess": "agent_health.connectors.subprocess:SubprocessConnector",
    "python": "agent_health.connectors.python:PythonConnector",
}


def connector_class(name: str) -> type[Connector]:
    target = CONNECTORS.get(name)
    if target is None:
        raise ConfigError(f"unknown connector {name!r}; known: {', '.join(sorted(CONNECTORS))}")
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


TraceBinder = Callable[[RunResult, ResolvedAgent], RunResult]


class AgentRuntime:
    """An agent version ready to run: resolved once per engine run, shared by its tests."""

    def __init__(self, agent: ResolvedAgent, connector: Connector | None = None,
                 bind_traces: TraceBinder | None = None):
        self.agent = agent
        self.connector = connector or connector_class(agent.connector)(agent)
        self._bind_traces = bind_traces

    @property
    def ref(self) -> str:
        return self.agent.ref

    async def invoke(self, request: AgentRequest) -> RunResult:
        request = request.model_copy(update={
            "run_id": request.run_id or uuid.uuid4().hex,
            "trace_id": request.trace_id or os.urandom(16).hex(),
            "span_id": request.span_id or os.urandom(8).hex(),
        })
        started = time.time()
        try:
            result = await self.connector.run(request)
        except AgentError:
            raise
        except Exception as exc:  # the connector's own bug or an unexpected transport error
            raise AgentError(f"agent {self.ref} ({self.connector.endpoint}): {type(exc).__name__}: {exc}") from exc
        updates: dict[str, Any] = {}
        if not result.agent:
            updates["agent"] = self.ref
        if not result.started_at:
            updates["started_at"] = started
        if updates:
            result = result.model_copy(update=updates)
        return self._bind_traces(result, self.agent) if self._bind_traces else result

    async def aclose(self) -> None:
        await self.connector.aclose()
