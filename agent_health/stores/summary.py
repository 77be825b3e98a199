"""The part of a stored result that rollups and comparisons read.

Rollups read tens of thousands of these at once, so they are slotted, frozen dataclasses
(validated by pydantic from JSON in one pass, the rest of a stored result skipped, repeated
strings shared): about 0.9 KB and 10 µs each, against 5 KB and 55 µs as pydantic models with
the full insights and usage."""

from __future__ import annotations

from dataclasses import fields as _dataclass_fields
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, AliasPath, BeforeValidator, ConfigDict, Field, TypeAdapter
from pydantic.dataclasses import dataclass

from agent_health.model import TestResult

_LEAN = ConfigDict(extra="ignore", cache_strings="all")

# The derived metrics a summary keeps (numbers only): what per-version metric distributions read
# without loading whole results. The rest of a result's metrics (histograms, per-step lists) stay
# in the full result.
SUMMARY_METRICS = (
    "total_tokens",
    "cost_usd",
    "latency_ms",
    "llm_calls",
    "tool_calls",
    "redundant_calls",
    "tool_errors",
    "retries",
    "tool_retries",
    "steps",
    "turns",
    "goal_reached",
    "turns_to_goal",
)
# Yes-or-no metrics a summary keeps as 1 or 0 (a conversation's goal reached: its mean is the goal rate).
BOOLEAN_METRICS = ("goal_reached",)


def _numeric_metrics(value: Any) -> dict[str, float]:
    """The SUMMARY_METRICS of a result's metrics that are numbers (missing ones left out; a bool
    only for BOOLEAN_METRICS, as 1 or 0)."""
    if not isinstance(value, dict):
        return {}
    return {
        name: float(v)
        for name in SUMMARY_METRICS
        if isinstance(v := value.get(name), (int, float)) and (not isinstance(v, bool) or name in BOOLEAN_METRICS)
    }


@dataclass(frozen=True, slots=True, config=_LEAN)
class TrialOutcome:
    """One trial's status and score, without its run and signals (comparisons' noise rule)."""

    status: str
    score: float | None = None


@dataclass(frozen=True, slots=True, config=_LEAN)
class TokenCounts:
    """Token totals of a result (agent or judge), without the per-call details."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    model: str | None = None


@dataclass(frozen=True, slots=True, config=_LEAN)
class InsightBrief:
    """What suite recommendations read of an insight (its evidence stays in the full result)."""

    rule: str
    severity: str = "info"
    summary: str = ""
    recommendation: str = ""


@dataclass(frozen=True, slots=True, config=_LEAN)
class ResultSummary:
    """A `TestResult` without its run, signals, trials, insight evidence and non-numeric metrics."""

    test_id: str
    suite: str
    agent: str
    status: str = Field(description="passed | failed | errored.")
    score: float | None = None
    labels: tuple[str, ...] = ()
    content_hash: str = ""
    started_at: float = 0.0
    duration_ms: float = 0.0
    usage: TokenCounts = TokenCounts()
    judge_usage: TokenCounts = TokenCounts()
    cost_usd: float | None = None
    judge_cost_usd: float | None = None  # the judge part of cost_usd: summaries say it apart
    epochs: int = 1
    pass_at_k: float | None = None
    pass_hat_k: float | None = None
    flaky: bool = False
    trials: tuple[TrialOutcome, ...] = ()  # the kept trials' outcomes when epochs > 1
    trial_counts: dict[str, int] | None = None  # every trial, per status (comparisons)
    error: str | None = None
    insights: tuple[InsightBrief, ...] = ()
    metrics: Annotated[dict[str, float], BeforeValidator(_numeric_metrics)] = Field(default_factory=dict)
    # What produced the result (its provenance), so a rollup can tell a result of an older test
    # definition or older settings from a current one without reading the whole result.
    agent_settings_hash: str = Field(
        default="", validation_alias=AliasChoices("agent_settings_hash", AliasPath("provenance", "agent_settings_hash"))
    )
    judge_settings_hash: str = Field(
        default="", validation_alias=AliasChoices("judge_settings_hash", AliasPath("provenance", "judge_settings_hash"))
    )
    # judges whose gating verdicts did not gate (judge.calibration): the rollup checks say so
    uncalibrated_judges: tuple[str, ...] = Field(
        default=(),
        validation_alias=AliasChoices("uncalibrated_judges", AliasPath("provenance", "uncalibrated_judges")),
    )
    calibrated_judges: tuple[str, ...] = Field(
        default=(),
        validation_alias=AliasChoices("calibrated_judges", AliasPath("provenance", "calibrated_judges")),
    )

    @classmethod
    def of(cls, result: TestResult) -> ResultSummary:
        fields = {name: getattr(result, name) for name in _FIELDS if name not in _PROVENANCE}
        prov = result.provenance
        fields |= {name: getattr(prov, name) if prov else _EMPTY[name] for name in _PROVENANCE}
        for name in ("usage", "judge_usage"):
            u = fields[name]
            fields[name] = TokenCounts(u.input_tokens, u.output_tokens, u.total_tokens, u.model)
        fields["trials"] = tuple(TrialOutcome(t.status, t.score) for t in result.trials)
        fields["insights"] = tuple(
            InsightBrief(i.rule, i.severity, i.summary, i.recommendation) for i in result.insights
        )
        return _ADAPTER.validate_python(fields)

    @classmethod
    def model_validate_json(cls, data: str | bytes) -> ResultSummary:
        """Parse a stored result's (or summary's) JSON, skipping everything else in it."""
        return _ADAPTER.validate_json(data)

    @classmethod
    def model_validate(cls, data: Any) -> ResultSummary:
        return _ADAPTER.validate_python(data)

    def model_dump(self, mode: Literal["json", "python"] = "python") -> dict[str, Any]:
        return dict(_ADAPTER.dump_python(self, mode=mode))

    def model_dump_json(self) -> str:
        return _ADAPTER.dump_json(self).decode()


_ADAPTER: TypeAdapter[ResultSummary] = TypeAdapter(ResultSummary)
_FIELDS = tuple(f.name for f in _dataclass_fields(ResultSummary))
_PROVENANCE = ("agent_settings_hash", "judge_settings_hash", "uncalibrated_judges", "calibrated_judges")
_EMPTY: dict[str, Any] = {n: () for n in _PROVENANCE} | {"agent_settings_hash": "", "judge_settings_hash": ""}
