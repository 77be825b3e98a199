"""Judge calibration: human labels of verdicts, and how well a judge agrees with them.

A label says whether one test's claim (or every claim of the test) truly holds for one agent
version or evaluation run. `agent-health calibrate` matches labels with the stored verdicts of
each judge identity and measures agreement (analysis/calibration.py); the newest calibration of
a judge decides whether it may gate when `judge.calibration` is configured.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict, Field

from agent_health.model.provenance import JudgeIdentity

# What makes two judges the same for calibration: who answered, which model, which definition
# and prompt. The endpoint and cache keys are left out: the same model behind another address or
# with another cache entry judges alike.
_IDENTITY_FIELDS = ("provider", "model", "evaluator", "kind", "definition_hash", "prompt_version")


def judge_key(identity: JudgeIdentity) -> str:
    """A short stable key of a judge identity for calibration (provider, model, evaluator, kind,
    definition hash, prompt version)."""
    fields = {f: getattr(identity, f) for f in _IDENTITY_FIELDS}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


class Label(BaseModel):
    """One human label: does the claim hold for this test's result?"""

    model_config = ConfigDict(frozen=True)

    test_id: str = Field(description="The labelled test's id.")
    agent: str | None = Field(None, description="Agent version (KEY@VERSION) of the labelled result.")
    run_id: str | None = Field(None, description="Evaluation run of the labelled result (instead of, or with, agent).")
    criterion: str | None = Field(
        None, description="The judged claim; without it the label applies to every verdict of the test."
    )
    judge: str | None = Field(None, description="Judge key (judge_key) the label was given against, when known.")
    passed: bool = Field(description="The human's answer: the claim holds (pass) or not (fail).")
    score: float | None = Field(None, description="Optional 0-1 score of the human.")
    note: str = Field("", description="Why the human decided so.")
    labeller: str = Field("", description="Who labelled.")
    source: str = Field("", description="Where the label came from: file and line.")

    @property
    def key(self) -> tuple[str, str | None, str | None, str | None, str | None, str]:
        """What a newer label of the same thing replaces (result, claim, judge, labeller)."""
        return (self.test_id, self.agent, self.run_id, self.criterion, self.judge, self.labeller)


class Confusion(BaseModel):
    """Judge verdicts against human labels; positive means pass."""

    model_config = ConfigDict(frozen=True)

    tp: int = Field(0, description="Judge pass, human pass.")
    fp: int = Field(0, description="Judge pass, human fail.")
    fn: int = Field(0, description="Judge fail, human pass.")
    tn: int = Field(0, description="Judge fail, human fail.")

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn


class Disagreement(BaseModel):
    """One case where the judge and the human answered differently, with both reasonings."""

    model_config = ConfigDict(frozen=True)

    test_id: str
    agent: str
    criterion: str = Field(description="The judged claim.")
    judge_passed: bool
    human_passed: bool
    judge_reasoning: str = Field("", description="The judge's reasoning.")
    human_note: str = Field("", description="The human's note.")
    labeller: str = ""


class Calibration(BaseModel):
    """How well one judge identity (and optionally one criterion) agrees with human labels."""

    model_config = ConfigDict(frozen=True)

    judge_key: str = Field(description="judge_key() of the judge identity.")
    judge: JudgeIdentity = Field(description="The judge identity (as its first matched verdict recorded it).")
    criterion: str | None = Field(None, description="The claim, for a per-criterion row; None over every claim.")
    n: int = Field(description="Labelled verdicts compared.")
    agreement: float | None = Field(None, description="Share of verdicts equal to the label.")
    kappa: float | None = Field(None, description="Cohen's kappa; None when undefined (one class only).")
    kappa_low: float | None = Field(None, description="Lower bound of kappa's 95% interval (asymptotic).")
    kappa_high: float | None = Field(None, description="Upper bound of kappa's 95% interval (asymptotic).")
    tpr: float | None = Field(None, description="True positive rate: judge pass among human passes.")
    tnr: float | None = Field(None, description="True negative rate: judge fail among human fails.")
    fpr: float | None = Field(None, description="False positive rate: judge pass among human fails.")
    fnr: float | None = Field(None, description="False negative rate: judge fail among human passes.")
    confusion: Confusion = Field(default_factory=Confusion, description="The confusion matrix.")
    disagreements: tuple[Disagreement, ...] = Field((), description="Every disagreeing case.")
    calibrated_at: float = Field(0.0, description="Unix time of the calibration.")
    source: str = Field("", description="What was calibrated: the run or store, and the labels file.")


class CalibrationGate(BaseModel):
    """`judge.calibration`: a gating judge must have a calibration this good, or it only observes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_kappa: float = Field(0.6, ge=-1, le=1, description="Lowest acceptable Cohen's kappa.")
    min_labels: int = Field(30, ge=1, description="Fewest labelled verdicts a calibration must compare.")

    def check(self, calibration: Calibration | None) -> str | None:
        """None when `calibration` passes the gate, else why not (one sentence)."""
        if calibration is None:
            return "it has no calibration (run `agent-health calibrate --labels FILE`)"
        if calibration.n < self.min_labels:
            return f"its calibration compared {calibration.n} label(s), fewer than min_labels {self.min_labels}"
        if calibration.kappa is None:
            return "its calibration's kappa is undefined (the labels hold one answer only)"
        if calibration.kappa < self.min_kappa:
            return f"its calibration's kappa {calibration.kappa:.3f} is below min_kappa {self.min_kappa:g}"
        return None
