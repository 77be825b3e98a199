"""The part of a stored result that rollups and comparisons read."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agent_health.model import Insight, TestResult, Usage


class TrialOutcome(BaseModel):
    """One trial's status and score, without its run and signals."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    status: str = Field(description="passed | failed | errored.")
    score: float | None = None


class ResultSummary(BaseModel):
    """A `TestResult` without its run and signals (trials reduced to outcomes). Parsing only these fields (the rest
    of the JSON is skipped, not validated) makes loading many results several times faster."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    test_id: str
    suite: str
    agent: str
    status: str = Field(description="passed | failed | errored.")
    score: float | None = None
    labels: tuple[str, ...] = ()
    content_hash: str = ""
    duration_ms: float = 0.0
    usage: Usage = Field(default_factory=Usage)
    judge_usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    epochs: int = 1
    pass_at_k: float | None = None
    pass_hat_k: float | None = None
    flaky: bool = False
    trials: tuple[TrialOutcome, ...] = Field((), description="Each trial's outcome when epochs > 1 (comparisons).")
    error: str | None = None
    insights: tuple[Insight, ...] = ()

    @classmethod
    def of(cls, result: TestResult) -> ResultSummary:
        return cls.model_validate(result, from_attributes=True)
