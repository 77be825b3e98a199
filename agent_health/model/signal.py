"""Signals and verdicts: the facts a test body records, in body order."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_health.errors import InfrastructureError, VerdictFailed
from agent_health.model.limits import StoredText
from agent_health.model.provenance import JudgeIdentity
from agent_health.model.run import Usage

SignalKind = Literal["deterministic", "judge", "metric"]
SignalRole = Literal["gate", "observe"]


class Signal(BaseModel):
    """One recorded fact about a test: an expectation, a judge verdict, or a derived metric.

    Only `gate` signals decide pass/fail; `observe` signals feed score and insights.
    A skipped signal is neutral; an errored one makes the test `errored`.
    """

    model_config = ConfigDict(frozen=True)

    kind: SignalKind = Field(description="deterministic (expect), judge, or metric.")
    role: SignalRole = Field("gate", description="gate decides pass/fail; observe never does.")
    name: str = Field(description="What was checked, e.g. \"to_have_called_tool('search_logs')\".")
    passed: bool | None = Field(None, description="Outcome; None for pure measurements and skipped judges.")
    score: float | None = Field(None, description="0-1 score when the signal is graded.")
    value: float | None = Field(None, description="Measured value of a metric signal.")
    reasoning: StoredText | None = Field(None, description="Judge reasoning or failure message.")
    evidence: dict[str, Any] | None = Field(None, description="Actual vs expected, and other evidence.")
    skipped: bool = Field(False, description="A skipped judge: neutral, never gates.")
    errored: bool = Field(False, description="Infrastructure failed while producing this signal.")
    cached: bool = Field(False, description="Verdict came from the judge cache.")
    soft: bool = Field(False, description="Recorded by expect.soft(): the body continued.")


class Verdict(BaseModel):
    """A judge's verdict on one claim. `judge()` returns it and records it; it never raises."""

    model_config = ConfigDict(frozen=True)

    passed: bool = Field(description="Whether the claim holds.")
    score: float | None = Field(None, description="0-1 score.")
    reasoning: StoredText = Field("", description="Why the claim passed or failed.")
    criteria: str = Field("", description="The claim that was judged.")
    role: SignalRole = Field("gate", description="gate, or observe (never gates).")
    cached: bool = Field(False, description="Came from the judge cache.")
    skipped: bool = Field(False, description="Judging was skipped: neutral.")
    errored: bool = Field(False, description="The judge failed (provider, parse): the test errors.")
    error: StoredText | None = Field(None, description="The real error text when errored.")
    evaluator: str = Field("demo", description="Evaluator or provider that produced the verdict.")
    model: str | None = Field(None, description="Judge model, when an LLM was used.")
    usage: Usage = Field(default_factory=Usage, description="Judge tokens (counted apart from the agent's).")
    details: dict[str, Any] = Field(default_factory=dict, description="Per-metric scores, tool calls, suggestions.")
    identity: JudgeIdentity | None = Field(
        None,
        description="Which judge gave it (provider, model, evaluator, definition hash, cache keys); "
        "the judge service fills it.",
    )
    calibration: str | None = Field(
        None,
        description="Why a gating verdict was demoted to observe: its judge misses `judge.calibration` "
        "(no calibration, too few labels, kappa too low).",
    )
    calibrated: bool = Field(
        False, description="The judge met `judge.calibration`, so this gating verdict gated (False: no gate applied)."
    )

    def or_throw(self) -> Verdict:
        """Stop the test body when this verdict failed (or errored); return self otherwise."""
        if self.errored:
            raise InfrastructureError(f"judge errored: {self.error or self.reasoning}")
        if not self.skipped and not self.passed:
            raise VerdictFailed(f"judge failed: {self.criteria!r}: {self.reasoning}")
        return self

    def to_pass(self) -> None:
        """Hard assertion form of `or_throw()`."""
        self.or_throw()

    def to_signal(self) -> Signal:
        return Signal(
            kind="judge",
            role=self.role,
            name=f"judge({self.criteria!r})",
            passed=None if self.skipped else (None if self.errored else self.passed),
            score=None if (self.skipped or self.errored) else self.score,
            reasoning=self.error if self.errored else self.reasoning,
            evidence={
                "evaluator": self.evaluator,
                "model": self.model,
                **({"details": self.details} if self.details else {}),
                **({"usage": self.usage.model_dump()} if self.usage.total_tokens else {}),
                **({"provenance": self.identity.model_dump(mode="json")} if self.identity else {}),
                **({"calibration": self.calibration} if self.calibration else {}),
                **({"calibrated": True} if self.calibrated else {}),
            },
            skipped=self.skipped,
            errored=self.errored,
            cached=self.cached,
        )
