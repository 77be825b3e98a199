"""One suite for one agent version, summarized for a pipeline transport: the rollup, the derived
metric distributions, the insight recommendations, the comparison against the baseline version
and the gates. Everything is computed from the result store's summaries of the suite's current
tests (never whole results, but the failing tests' reasons), so the Dagster layer only maps it to
assets, metadata and checks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_health.analysis.compare import Comparison, compare
from agent_health.analysis.insights import rollup_recommendations
from agent_health.analysis.rollup import SuiteRollup, percentile, rollup
from agent_health.pipeline.execute import failure_reason
from agent_health.pipeline.freshness import Current, out_of_date
from agent_health.pipeline.gates import Gate, Thresholds, rollup_gates
from agent_health.pipeline.tables import (
    Column,
    Table,
    label_table,
    ms,
    percent,
    problem_table,
    recommendation_table,
    sig,
)
from agent_health.stores import ResultKey, ResultStore, ResultSummary
from agent_health.stores.summary import SUMMARY_METRICS

# What each derived metric counts, for the metrics table (units in the name where there is one).
METRIC_DESCRIPTIONS = {
    "total_tokens": "Agent tokens per test.",
    "cost_usd": "Agent cost per test, USD.",
    "latency_ms": "Agent run duration per test, ms.",
    "llm_calls": "LLM calls per test.",
    "tool_calls": "Tool calls per test.",
    "redundant_calls": "Repeated tool calls with near-same arguments per test.",
    "tool_errors": "Tool results that were errors per test.",
    "retries": "Transport retries per test.",
    "tool_retries": "Tool calls repeated right after that tool failed, per test.",
    "steps": "Trajectory steps per test.",
}
FAILURE_REASONS_READ = 200  # failing tests whose full result is read for its reason


def current_summaries(store: ResultStore, suite: str, agent: str, test_ids: Sequence[str]) -> list[ResultSummary]:
    """Summaries of the suite's current tests only (removed tests no longer count)."""
    return list(store.get_summaries(ResultKey(agent, suite, t) for t in test_ids))


def previous_version(agents: Sequence[str], agent: str, configured: str | None = None) -> str | None:
    """Baseline of `agent`: the configured one, else the version of the same agent registered just
    before it (demo@v2 -> demo@v1); None for an agent's first version."""
    if configured:
        return configured if configured != agent else None
    same = [a for a in agents if a.partition("@")[0] == agent.partition("@")[0]]
    if agent not in same:
        return None
    i = same.index(agent)
    return same[i - 1] if i > 0 else None


def _as_is(value: Any) -> Any:
    return value if isinstance(value, int) else sig(value)


# how a rollup figure is shown in Dagster when not as is: shares in percent, times in whole ms
_SHOWN: dict[str, tuple[str, Any]] = {
    "pass_rate": ("pass_rate_pct", percent),
    "errored_share": ("errored_pct", percent),
    "latency_p50_ms": ("latency_p50_ms", ms),
    "latency_p95_ms": ("latency_p95_ms", ms),
    "goal_rate": ("goal_rate_pct", percent),
    "mean_turns": ("mean_turns", sig),
    "mean_turns_to_goal": ("mean_turns_to_goal", sig),
}


@dataclass(frozen=True)
class MetricStats:
    """The distribution of one derived metric over a version's tests."""

    name: str
    tests: int
    total: float
    mean: float
    p50: float
    p95: float
    max: float


def metric_distributions(results: Sequence[ResultSummary]) -> list[MetricStats]:
    """Per derived metric (tokens, cost, latency, LLM and tool calls, errors, retries, steps), its
    distribution over the tests that report it; metrics no test reports are left out."""
    out = []
    for name in SUMMARY_METRICS:
        values = [r.metrics[name] for r in results if name in r.metrics]
        if values:
            out.append(
                MetricStats(
                    name=name,
                    tests=len(values),
                    total=sum(values),
                    mean=sum(values) / len(values),
                    p50=percentile(values, 50) or 0.0,
                    p95=percentile(values, 95) or 0.0,
                    max=max(values),
                )
            )
    return out


def metrics_table(stats: Sequence[MetricStats]) -> Table:
    columns = (
        Column("metric", "string", "Derived metric (per test)."),
        Column("tests", "int", "Tests that report it."),
        Column("total", "float", "Sum over those tests."),
        Column("mean", "float", "Mean per test."),
        Column("p50", "float", "Median per test."),
        Column("p95", "float", "95th percentile per test."),
        Column("max", "float", "Largest per test."),
    )
    rows = [
        {
            "metric": s.name,
            "tests": s.tests,
            "total": sig(s.total),
            "mean": sig(s.mean),
            "p50": sig(s.p50),
            "p95": sig(s.p95),
            "max": sig(s.max),
        }
        for s in stats
    ]
    return Table(columns, rows)


def metric_numbers(stats: Sequence[MetricStats]) -> dict[str, float | None]:
    """The figures worth plotting over time: medians and p95s, and totals of what adds up."""
    by = {s.name: s for s in stats}
    out: dict[str, float | None] = {}
    for name, unit in (("latency_ms", "latency"), ("total_tokens", "tokens"), ("cost_usd", "cost_usd")):
        if name in by:
            out[f"{unit}_p50"] = sig(by[name].p50)
            out[f"{unit}_p95"] = sig(by[name].p95)
    for name in ("total_tokens", "cost_usd", "llm_calls", "tool_calls", "tool_errors", "retries"):
        if name in by:
            out[f"{name}_total"] = sig(by[name].total)
    # conversations: their mean turns, and a simulated user's goal rate and mean turns to its goal
    for name, key in (("turns", "turns_mean"), ("goal_reached", "goal_rate"), ("turns_to_goal", "turns_to_goal_mean")):
        if name in by:
            out[key] = sig(by[name].mean)
    return out


def list_table(name: str, values: Sequence[str], description: str) -> Table:
    """A one-column table of names (a list shown as rows, not as a JSON blob)."""
    return Table((Column(name, "string", description),), [{name: v} for v in values])


@dataclass(frozen=True)
class SuiteVersion:
    """What a pipeline shows for one suite and one agent version."""

    suite: str
    agent: str
    tests: int
    missing: list[str]
    rollup: SuiteRollup
    metrics: list[MetricStats]
    failures: dict[str, str]
    baseline: str | None
    comparison: Comparison | None
    gates: list[Gate] = field(default_factory=list)
    # current tests without a stored result on the baseline (none without a baseline)
    baseline_missing: list[str] = field(default_factory=list)
    stale: dict[str, list[str]] = field(default_factory=dict)  # test id -> why its result is out of date

    def rollup_numbers(self) -> dict[str, Any]:
        """The rollup's figures (`SuiteRollup.metrics()`, so a figure added there shows here too) as
        plottable numbers with readable precision, and how many current tests have no result."""
        out: dict[str, Any] = {}
        for name, value in self.rollup.metrics().items():
            shown, fmt = _SHOWN.get(name, (name, _as_is))
            out[shown] = fmt(value)
        out["missing_results"] = len(self.missing)
        if self.baseline is not None:
            out["baseline_missing_results"] = len(self.baseline_missing)
        return out

    def tables(self) -> dict[str, Table]:
        """The rollup's tables: per label, failed and errored tests with their reasons, and the
        tests without a stored result (when any)."""
        out = {"labels": label_table(self.rollup), "failed_and_errored": problem_table(self.rollup, self.failures)}
        if self.missing:
            out["missing"] = list_table("test_id", self.missing[:500], "Current test without a stored result.")
        if self.baseline_missing:
            out["baseline_missing"] = list_table(
                "test_id", self.baseline_missing[:500], f"Current test without a stored result on {self.baseline}."
            )
        return out

    def metrics_table(self) -> Table:
        return metrics_table(self.metrics)

    def metric_numbers(self) -> dict[str, float | None]:
        return metric_numbers(self.metrics)

    def insights_table(self, limit: int = 50) -> Table:
        return recommendation_table(self.rollup.recommendations[:limit])


def summarize_version(
    store: ResultStore,
    suite: str,
    agent: str,
    test_ids: Sequence[str],
    registered: Sequence[str],
    thresholds: Thresholds,
    baseline: str | None = None,
    current: Current | None = None,
) -> SuiteVersion:
    """Summarize `suite` for `agent` over its current `test_ids`: read the summaries once, roll
    them up, derive the metric distributions and recommendations, compare with the baseline
    (`baseline`, else the version of the same agent registered before it in `registered`) and
    apply the gates. Current tests without a stored result on the version keep every gate from
    passing, and those without one on the baseline `no_regression`, by count and name (failing, or
    warning under `thresholds.missing_evidence`). With `current`
    (the current test definitions and settings), results produced from older ones are listed as
    out of date."""
    results = current_summaries(store, suite, agent, test_ids)
    have = {r.test_id for r in results}
    missing = [t for t in test_ids if t not in have]
    ru = rollup(results, suite, agent, rollup_recommendations(results))
    base = previous_version(registered, agent, baseline)
    comparison = None
    base_missing: list[str] = []
    if base:
        base_results = current_summaries(store, suite, base, test_ids)
        comparison = compare(base_results, results, base, agent) if base_results else None
        base_have = {r.test_id for r in base_results}
        base_missing = [t for t in test_ids if t not in base_have]
    failed = [ResultKey(agent, suite, t) for t in ru.failing[:FAILURE_REASONS_READ]]
    failures = {r.test_id: failure_reason(r) for r in store.get_many(failed)}
    uncalibrated = Counter(j for r in results for j in r.uncalibrated_judges)
    calibrated = Counter(j for r in results for j in r.calibrated_judges)
    gates = rollup_gates(
        ru,
        thresholds,
        comparison,
        missing=missing,
        uncalibrated=uncalibrated,
        calibrated=calibrated,
        baseline=base,
        baseline_missing=base_missing,
    )
    return SuiteVersion(
        suite=suite,
        agent=agent,
        tests=len(test_ids),
        missing=missing,
        rollup=ru,
        metrics=metric_distributions(results),
        failures=failures,
        baseline=base,
        comparison=comparison,
        baseline_missing=base_missing,
        gates=gates,
        stale=out_of_date(results, current) if current is not None else {},
    )
