"""The judge contract: a provider turns one JudgeRequest into one Verdict."""

from __future__ import annotations

import abc
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from agent_health.model import RunResult, Verdict


class JudgeRequest(BaseModel):
    """One claim to judge about one run (or a plain value)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    criteria: str = Field(description="The claim to check.")
    run: RunResult | None = Field(None, description="The run being judged, when the subject is a RunResult.")
    output: str = Field("", description="The text being judged.")
    context: tuple[str, ...] = Field(("output", "trajectory"), description="What the judge sees.")
    tools: tuple[str, ...] = Field((), description="Tools the judge may call (e.g. 'trace_query').")
    evaluator: str | None = Field(None, description="Named evaluator from the configuration.")
    model: str | None = Field(None, description="Judge model override for this call.")
    role: Literal["gate", "observe"] = "gate"
    test_id: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    trace_tools: Any = Field(None, description="RunTraceTools bound to this run, when traces are enabled.")


class LLM(Protocol):
    """A provider-agnostic completion helper (the `llm` given to custom evaluators and the insight
    synthesizer). Implementations go through the judge cache."""

    async def complete(self, prompt: str, *, system: str | None = None, json_mode: bool = False) -> str:
        """One completion; returns the model's text."""
        ...


class JudgeProvider(abc.ABC):
    """Produces a verdict. Raise on provider failure; the service turns it into an errored verdict."""

    name: ClassVar[str] = ""

    @abc.abstractmethod
    async def evaluate(self, request: JudgeRequest) -> Verdict:
        """Judge one claim."""

    async def aclose(self) -> None:
        """Release connections."""
