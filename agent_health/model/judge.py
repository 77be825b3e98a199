"""The judge contract: what one `judge()` call asks a provider to decide."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_health.model.run import RunResult


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
    role: Literal["gate", "observe"] = Field("gate", description="gate: the verdict can fail the test; observe: never.")
    test_id: str | None = Field(None, description="Id of the test that asks.")
    options: dict[str, Any] = Field(default_factory=dict, description="Evaluator-specific options.")
    trace_tools: Any = Field(None, description="RunTraceTools bound to this run, when traces are enabled.")
    judge: Any = Field(None, description="A named judge (agent_health.judges.kit.Judge) that decides this verdict.")
    subject: Any = Field(None, description="The judged value itself when it is not a RunResult (a dict stays a dict).")
