"""Test results: the versioned, JSON round-trippable output of the engine."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_health.model.case import TestCase
from agent_health.model.json_bytes import model_json
from agent_health.model.limits import StoredText
from agent_health.model.provenance import JudgeIdentity, Provenance
from agent_health.model.run import RunResult, Usage
from agent_health.model.signal import Signal

SCHEMA_VERSION = 1

TestStatus = Literal["passed", "failed", "errored"]
EvaluationType = Literal["deterministic", "agentic", "hybrid"]


class Insight(BaseModel):
    """One diagnosis about a test, with evidence and a concrete recommendation."""

    model_config = ConfigDict(frozen=True)

    rule: str = Field(description="Which rule or synthesizer produced it, e.g. 'redundant_calls'.")
    severity: Literal["info", "warning", "error"] = Field("info", description="How much it matters.")
    summary: StoredText = Field(description="One-line finding.")
    evidence: dict[str, Any] = Field(default_factory=dict, description="Numbers and steps behind it.")
    recommendation: StoredText = Field("", description="What to change in the agent.")


TRIALS_KEPT = 32  # trials a result keeps in full (agent run, signals); every trial is counted


class TrialResult(BaseModel):
    """One epoch of a test."""

    model_config = ConfigDict(frozen=True)

    epoch: int = Field(description="0-based trial number.")
    status: TestStatus
    score: float | None = None
    signals: tuple[Signal, ...] = ()
    run: RunResult | None = Field(None, description="The agent run of this trial, if the body ran the agent.")
    error: StoredText | None = None
    duration_ms: float = 0.0


class Judgement(BaseModel):
    """One earlier judgement of a result, kept when the result is re-judged: when, by whom, its
    verdicts and the status and score they gave."""

    model_config = ConfigDict(frozen=True)

    judged_at: float = Field(0.0, description="Unix time of the judgement.")
    eval_run_id: str | None = Field(None, description="The evaluation run that made it.")
    content_hash: str = Field("", description="The test definition it ran from.")
    status: TestStatus
    score: float | None = None
    error: StoredText | None = None
    signals: tuple[Signal, ...] = Field((), description="Its judge signals (verdicts), in body order.")
    judges: tuple[JudgeIdentity, ...] = Field((), description="The judges that gave them, each once.")
    judge_usage: Usage = Field(default_factory=Usage, description="Judge tokens it spent.")

    @classmethod
    def of(cls, result: TestResult) -> Judgement:
        """The judgement a result holds now (its verdicts, status and score)."""
        prov = result.provenance
        return cls(
            judged_at=prov.judged_at if prov and prov.judged_at else result.started_at,
            eval_run_id=result.eval_run_id,
            content_hash=result.content_hash,
            status=result.status,
            score=result.score,
            error=result.error,
            signals=tuple(s for s in result.signals if s.kind == "judge"),
            judges=result.judges,
            judge_usage=result.judge_usage,
        )


class TestResult(BaseModel):
    """The outcome of one test against one agent version.

    `errored` means infrastructure failed; it is excluded from pass rate and `error` carries the
    real message. With epochs, the top-level fields summarize every trial, `trial_counts` counts
    them by status and `trials` holds the first `TRIALS_KEPT` in full (memory stays flat in the
    number of epochs).
    """

    model_config = ConfigDict(frozen=True)
    __test__ = False
    # The JSON text of this very object, once the engine's check for secrets has made it (see
    # `json_text`). A slot, not a field: never copied (`model_copy`, pickling), never compared.
    __slots__ = ("_json",)

    schema_version: int = Field(SCHEMA_VERSION, description="Version of this schema.")
    test_id: str = Field(description="Stable test id (a Dagster partition key).")
    name: str
    suite: str
    source_file: str
    line: int | None = Field(None, description="Line of the test definition in source_file (None for older results).")
    labels: tuple[str, ...] = ()
    content_hash: str = Field("", description="Hash of the test definition that produced this result.")
    agent: str = Field(description="Agent version as KEY@VERSION.")
    status: TestStatus
    score: float | None = Field(None, description="0-1; see engine.scoring for the rule.")
    evaluation_type: EvaluationType = Field("deterministic", description="Inferred from the signals produced.")
    signals: tuple[Signal, ...] = Field((), description="Signals in body order (last trial with epochs).")
    metrics: dict[str, Any] = Field(default_factory=dict, description="Derived metrics of the run.")
    insights: tuple[Insight, ...] = Field((), description="Diagnosis from the insight layer.")
    eval_run_id: str | None = Field(
        None, description="The evaluation run (CLI invocation or Dagster run) that produced this result."
    )
    run_id: str | None = Field(None, description="Run id of the (last) agent run.")
    run: RunResult | None = Field(None, description="The (last) agent run, when the body ran the agent.")
    error: StoredText | None = Field(None, description="Real error text when errored; the first failure otherwise.")
    started_at: float = 0.0
    duration_ms: float = 0.0
    usage: Usage = Field(default_factory=Usage, description="Agent tokens over all trials.")
    judge_usage: Usage = Field(default_factory=Usage, description="Judge tokens over all trials.")
    cost_usd: float | None = Field(None, description="Estimated agent + judge cost from the price table.")
    judge_cost_usd: float | None = Field(
        None, description="The judge part of cost_usd (cache hits cost nothing); None when unknown."
    )
    epochs: int = 1
    trials: tuple[TrialResult, ...] = Field(
        (), description=f"The first {TRIALS_KEPT} trials in full when epochs > 1 (trial_counts counts them all)."
    )
    trial_counts: dict[str, int] | None = Field(
        None, description="Trials per status (passed, failed, errored) over every epoch, when epochs > 1."
    )
    pass_at_k: float | None = Field(None, description="1 if any trial passed (epochs > 1).")
    pass_hat_k: float | None = Field(None, description="1 if every trial passed (epochs > 1).")
    flaky: bool = Field(False, description="Trials disagreed.")
    provenance: Provenance | None = Field(None, description="What produced this result (None for older results).")
    judgements: tuple[Judgement, ...] = Field(
        (),
        description="Earlier judgements, oldest first, when the result was re-judged; the result's own "
        "signals, status and score are the newest.",
    )

    def remember_json(self, text: str) -> None:
        """Keep `text`, this result's `model_dump_json()` as just made, for `json_text` (the
        engine's secrets check encodes every result it returns; the store and the JSON reporters
        then need not encode it again, which was about a tenth of a stored run's CPU per test)."""
        object.__setattr__(self, "_json", text)

    def forget_json(self) -> None:
        """Drop the remembered text (about 4 kB a result): once stored and reported, a result a
        caller keeps (an in-process run's collected results) holds only its fields."""
        try:  # (a try costs nothing here; a suppress() context was a microsecond a result)
            object.__delattr__(self, "_json")
        except AttributeError:
            pass

    def json_text(self) -> str:
        """`model_dump_json()`: the remembered text when there is one. A result is frozen and
        nothing changes the values inside it in place, so the text stays true."""
        text: str | None = getattr(self, "_json", None)
        return text if text is not None else model_json(self).decode()

    @property
    def judges(self) -> tuple[JudgeIdentity, ...]:
        """The judges whose verdicts this result holds, each once, in body order."""
        seen: dict[str, JudgeIdentity] = {}
        for s in self.signals:
            raw = (s.evidence or {}).get("provenance") if s.kind == "judge" else None
            if isinstance(raw, dict):
                identity = JudgeIdentity.model_validate(raw)
                seen.setdefault(identity.model_dump_json(), identity)
        return tuple(seen.values())

    @classmethod
    def for_case(cls, case: TestCase, agent: str, **kw: Any) -> TestResult:
        return cls(
            test_id=case.id,
            name=case.name,
            suite=case.suite,
            source_file=case.source_file,
            line=case.line,
            labels=case.labels,
            content_hash=case.content_hash,
            agent=agent,
            **kw,
        )
