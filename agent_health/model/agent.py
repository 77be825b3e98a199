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
    turn: int = Field(0, description="The conversation turn this request opens (1-based); 0 for a run of one turn.")
    history: tuple[dict[str, Any], ...] = Field(
        (),
        description="The conversation before this turn, oldest first: `{role, content}` messages (the user's "
        "messages as they were sent, without the context, and the agent's answers).",
    )
    conversation_id: str = Field("", description="Id of the conversation, the same for each of its turns.")
    session: dict[str, Any] = Field(
        default_factory=dict,
        description="The conversation's state, one dict for all its turns: what the connector kept from the "
        "earlier turns (a session id the agent gave), and a python agent's own state.",
    )

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far with this turn's message last, as `{role, content}` messages."""
        return [*(dict(m) for m in self.history), {"role": "user", "content": self.prompt}]

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
