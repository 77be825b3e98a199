"""The agent contract every connector, the configuration and the replay layer share."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class AgentRequest(BaseModel):
    """Everything one agent invocation receives."""

    model_config = ConfigDict(frozen=True)

    prompt: str = Field(description="The prompt sent to the agent.")
    context: tuple[dict[str, Any], ...] = Field((), description="`{description, value}` items sent with the prompt.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for the agent.")
    files: dict[str, Any] = Field(default_factory=dict, description="Files to provision, name -> content.")
    provisioned: dict[str, Any] = Field(default_factory=dict, description="Structured values for the payload.")
    test_id: str | None = Field(None, description="Id of the test that runs the agent.")
    timeout_s: float | None = Field(None, description="The test's own timeout, when it has one.")
    run_id: str = Field("", description="Correlation id of this run; filled in by the runtime.")
    trace_id: str = Field("", description="W3C trace id of this run; filled in by the runtime.")
    span_id: str = Field("", description="W3C parent span id of this run; filled in by the runtime.")

    @property
    def traceparent(self) -> str:
        """W3C trace context header value for this run."""
        return f"00-{self.trace_id}-{self.span_id}-01"


class ResolvedAgent(BaseModel):
    """An agent at one version: its connector name and merged settings."""

    model_config = ConfigDict(frozen=True)

    key: str = Field(description="Agent key, the part before '@'.")
    version: str = Field(description="Version name, the part after '@'.")
    connector: str = Field(description="Connector kind (see agent_health/connectors/registry.py).")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="Connector settings with the version's overrides."
    )
    traces: bool = Field(False, description="Whether this agent's runs have traces.")

    @property
    def ref(self) -> str:
        """`KEY@VERSION`."""
        return f"{self.key}@{self.version}"
