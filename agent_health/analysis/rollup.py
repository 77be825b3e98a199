"""Suite rollups (one agent version x one suite) and the leaderboard across versions and suites.

Pass rate excludes errored tests (infrastructure failures) and counts them separately, so a
flaky agent endpoint shows up as errors rather than as a worse agent."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from agent_health.model import TestResult
from agent_health.stores import ResultKey, ResultStore
from agent_health.stores.summary import ResultSummary

AnyResult = TestResult | ResultSummary


def load_summaries(
    store: ResultStore, agent: str, suite: str, test_ids: Iterable[str] | None = None
) -> list[ResultSummary]:
    """What a rollup reads: the summaries (never whole results) of one agent version's suite, in
    one bulk read (local: one small parse per file; S3: the suite's summary log chunks, plus the
    result objects the log cannot vouch for; OpenSearch: one search of the stored summaries for
    most of a suite, mget for a few tests). `test_ids` picks exactly those
    tests (a suite's current ones; missing results are left out); None reads every stored one."""
    keys = (
        [ResultKey(agent, suite, t) for t in test_ids] if test_ids is not None else store.list(agent=agent, suite=suite)
    )
    return list(store.get_summaries(keys))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100) of `values`; None when empty."""
    if not values:
        return None
    data = sorted(values)
    pos = (len(data) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def _ms(value: float | None) -> float | None:
    """Milliseconds to the microsecond: more digits are noise in tables and plots."""
    return None if value is None else round(value, 3)


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class LabelStats(BaseModel):
    """Counts and rates of the tests carrying one label."""

    model_config = ConfigDict(frozen=True)

    label: str
    total: int = Field(description="Tests with this label.")
    passed: int
    failed: int
    errored: int
    pass_rate: float | None = Field(None, description="passed / (passed + failed); None when all errored.")
    mean_score: float | None = None


class ErroredTest(BaseModel):
    """An errored test and its real error text."""

    model_config = ConfigDict(frozen=True)

    test_id: str
    error: str = ""


class SuiteRollup(BaseModel):
    """Summary of one suite for one agent version."""

    model_config = ConfigDict(frozen=True)

    suite: str = Field(description="Suite name (eval file path without extension).")
    agent: str = Field(description="Agent version as KEY@VERSION.")
    total: int = Field(0, description="Results counted.")
    passed: int = 0
    failed: int = 0
    errored: int = Field(0, description="Infrastructure failures; excluded from pass_rate.")
    pass_rate: float | None = Field(None, description="passed / (passed + failed); None when nothing gradable.")
    errored_share: float = Field(0.0, description="errored / total.")
    mean_score: float | None = Field(None, description="Mean score over non-errored tests with a score.")
    pass_at_k: float | None = Field(None, description="Mean pass@k over tests run with epochs > 1.")
    pass_hat_k: float | None = Field(None, description="Mean pass^k over tests run with epochs > 1.")
    epoch_tests: int = Field(0, description="Tests that ran more than one epoch.")
    flaky: int = Field(0, description="Tests whose trials disagreed.")
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    judge_tokens: int = 0
    cost_usd: float | None = Field(None, description="Sum of known costs; None when no result had a cost.")
    latency_p50_ms: float | None = Field(None, description="Median test duration.")
    latency_p95_ms: float | None = Field(None, description="95th percentile test duration.")
    conversations: int = Field(0, description="Tests whose run was a conversation (more than one turn).")
    mean_turns: float | None = Field(None, description="Mean turns per conversation.")
    goal_rate: float | None = Field(
        None, description="Share of the simulated users' conversations that reached their goal."
    )
    mean_turns_to_goal: float | None = Field(None, description="Mean turns a simulated user took to reach its goal.")
    labels: dict[str, LabelStats] = Field(default_factory=dict, description="Per-label breakdown.")
    failing: list[str] = Field(default_factory=list, description="Ids of failed tests, sorted.")
    errored_tests: list[ErroredTest] = Field(default_factory=list, description="Errored tests with their error.")
    recommendations: list[dict[str, Any]] = Field(
        default_factory=list, description="Suite-level insight recommendations."
    )

    def metrics(self) -> dict[str, float | int]:
        """Numeric figures worth plotting over time (missing ones left out)."""
        out = {
            "total": self.total,
            "passed": self.passed,
            "failed": self.failed,
            "errored": self.errored,
            "errored_share": self.errored_share,
            "total_tokens": self.total_tokens,
        }
        if self.conversations:
            out["conversations"] = self.conversations
        for name in (
            "pass_rate",
            "mean_score",
            "pass_at_k",
            "cost_usd",
            "latency_p50_ms",
            "latency_p95_ms",
            "mean_turns",
            "goal_rate",
            "mean_turns_to_goal",
        ):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def to_markdown(self) -> str:
        """Headline table, per-label table, failing and errored lists."""
        lines = [f"### {self.suite} @ {self.agent}", "", "| metric | value |", "|---|---|"]
        for name, value in self.metrics().items():
            lines.append(f"| {name} | {_fmt(value)} |")
        if self.labels:
            lines += [
                "",
                "| label | total | passed | failed | errored | pass rate | mean score |",
                "|---|---|---|---|---|---|---|",
            ]
            for s in self.labels.values():
                lines.append(
                    f"| {s.label} | {s.total} | {s.passed} | {s.failed} | {s.errored} | "
                    f"{_fmt(s.pass_rate)} | {_fmt(s.mean_score)} |"
                )
        if self.failing:
            lines += ["", "**Failing:** " + ", ".join(f"`{t}`" for t in self.failing)]
        if self.errored_tests:
            lines += ["", "**Errored:**"] + [f"- `{e.test_id}`: {e.error[:200]}" for e in self.errored_tests]
        return "\n".join(lines)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


class _Acc:
    """Running counts for one group (the whole suite or one label)."""

    __slots__ = ("errored", "failed", "passed", "scores", "total")

    def __init__(self) -> None:
        self.total = self.passed = self.failed = self.errored = 0
        self.scores: list[float] = []

    def add(self, r: AnyResult) -> None:
        self.total += 1
        if r.status == "errored":
            self.errored += 1
            return
        if r.status == "passed":
            self.passed += 1
        else:
            self.failed += 1
        if r.score is not None:
            self.scores.append(r.score)


def rollup(
    results: Iterable[AnyResult], suite: str, agent: str, recommendations: list[dict[str, Any]] | None = None
) -> SuiteRollup:
    """Roll up the results of one suite for one agent version (results of other suites/agents
    are the caller's business: pass exactly the ones to count)."""
    acc = _Acc()
    labels: dict[str, _Acc] = defaultdict(_Acc)
    durations: list[float] = []
    k_any: list[float] = []
    k_all: list[float] = []
    flaky = in_tok = out_tok = tot_tok = judge_tok = 0
    cost, has_cost = 0.0, False
    failing: list[str] = []
    errored: list[ErroredTest] = []
    turns: list[float] = []
    goals: list[float] = []
    to_goal: list[float] = []
    for r in results:
        acc.add(r)
        metrics = r.metrics
        if isinstance(n := metrics.get("turns"), (int, float)):
            turns.append(float(n))
        if isinstance(g := metrics.get("goal_reached"), (int, float)):  # a bool in a result, 1 or 0 in a summary
            goals.append(float(g))
        if isinstance(n := metrics.get("turns_to_goal"), (int, float)):
            to_goal.append(float(n))
        for label in r.labels:
            labels[label].add(r)
        durations.append(r.duration_ms)
        if r.epochs > 1 and r.status != "errored":
            if r.pass_at_k is not None:
                k_any.append(r.pass_at_k)
            if r.pass_hat_k is not None:
                k_all.append(r.pass_hat_k)
        flaky += r.flaky
        in_tok += r.usage.input_tokens
        out_tok += r.usage.output_tokens
        tot_tok += r.usage.total_tokens
        judge_tok += r.judge_usage.total_tokens
        if r.cost_usd is not None:
            cost += r.cost_usd
            has_cost = True
        if r.status == "failed":
            failing.append(r.test_id)
        elif r.status == "errored":
            errored.append(ErroredTest(test_id=r.test_id, error=r.error or ""))
    return SuiteRollup(
        suite=suite,
        agent=agent,
        total=acc.total,
        passed=acc.passed,
        failed=acc.failed,
        errored=acc.errored,
        pass_rate=_ratio(acc.passed, acc.passed + acc.failed),
        errored_share=_ratio(acc.errored, acc.total) or 0.0,
        mean_score=_mean(acc.scores),
        pass_at_k=_mean(k_any),
        pass_hat_k=_mean(k_all),
        epoch_tests=len(k_any),
        flaky=flaky,
        input_tokens=in_tok,
        output_tokens=out_tok,
        total_tokens=tot_tok,
        judge_tokens=judge_tok,
        cost_usd=round(cost, 8) if has_cost else None,
        latency_p50_ms=_ms(percentile(durations, 50)),
        latency_p95_ms=_ms(percentile(durations, 95)),
        conversations=len(turns),
        mean_turns=_mean(turns),
        goal_rate=_mean(goals),
        mean_turns_to_goal=_mean(to_goal),
        labels={
            name: LabelStats(
                label=name,
                total=a.total,
                passed=a.passed,
                failed=a.failed,
                errored=a.errored,
                pass_rate=_ratio(a.passed, a.passed + a.failed),
                mean_score=_mean(a.scores),
            )
            for name, a in sorted(labels.items())
        },
        failing=sorted(failing),
        errored_tests=sorted(errored, key=lambda e: e.test_id),
        recommendations=recommendations or [],
    )


class LeaderboardRow(BaseModel):
    """One agent version on one suite (suite '*' is the total over every suite)."""

    model_config = ConfigDict(frozen=True)

    agent: str
    suite: str
    total: int
    passed: int
    failed: int
    errored: int
    pass_rate: float | None
    mean_score: float | None
    cost_usd: float | None
    total_tokens: int
    latency_p95_ms: float | None
    current_tests: int | None = Field(
        None,
        description="Current (registered) tests of the suite, of every suite for a total; None when not known. "
        "`total` counts those with a stored result.",
    )

    @computed_field(description="Current tests without a stored result (None when the current tests are not known).")  # type: ignore[prop-decorator]
    @property
    def missing(self) -> int | None:
        return None if self.current_tests is None else max(self.current_tests - self.total, 0)

    @computed_field(description="total / current_tests: the share of current tests with a stored result.")  # type: ignore[prop-decorator]
    @property
    def coverage(self) -> float | None:
        return _ratio(self.total, self.current_tests) if self.current_tests else None

    @property
    def label(self) -> str:
        """The agent version, marked when some of its current tests have no result:
        'demo@v3 (2,001 of 2,018 missing)'."""
        return f"{self.agent} ({self.missing:,} of {self.current_tests:,} missing)" if self.missing else self.agent


class Leaderboard(BaseModel):
    """Every agent version x suite in one table, plus a total row per agent version."""

    model_config = ConfigDict(frozen=True)

    rows: list[LeaderboardRow] = Field(default_factory=list, description="Per (suite, agent), best first.")
    totals: list[LeaderboardRow] = Field(default_factory=list, description="Per agent over all suites, best first.")

    @property
    def incomplete(self) -> dict[str, int]:
        """Agent version -> how many of its current tests have no stored result, for the versions
        whose total misses some (empty when every version is whole or the tests are not known)."""
        return {r.agent: r.missing for r in self.totals if r.missing}

    def to_markdown(self) -> str:
        head = [
            "| agent | suite | tests | pass rate | mean score | passed | failed | errored | cost USD | tokens "
            "| p95 ms |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        body = [
            f"| {r.label} | {r.suite} | {_tests(r)} | {_fmt(r.pass_rate)} | {_fmt(r.mean_score)} | {r.passed} "
            f"| {r.failed} | {r.errored} | {_fmt(r.cost_usd)} | {r.total_tokens} | {_fmt(r.latency_p95_ms)} |"
            for r in [*self.totals, *self.rows]
        ]
        return "\n".join(head + body)


def _tests(row: LeaderboardRow) -> str:
    return f"{row.total}" if row.current_tests is None else f"{row.total} of {row.current_tests}"


def _row(agent: str, suite: str, r: SuiteRollup, current: Mapping[str, int]) -> LeaderboardRow:
    return LeaderboardRow(
        current_tests=current.get(suite),
        agent=agent,
        suite=suite,
        total=r.total,
        passed=r.passed,
        failed=r.failed,
        errored=r.errored,
        pass_rate=r.pass_rate,
        mean_score=r.mean_score,
        cost_usd=r.cost_usd,
        total_tokens=r.total_tokens,
        latency_p95_ms=r.latency_p95_ms,
    )


def _rank(row: LeaderboardRow) -> tuple[Any, ...]:
    return (
        -(row.pass_rate if row.pass_rate is not None else -1.0),
        -(row.mean_score if row.mean_score is not None else -1.0),
        row.cost_usd or 0.0,
        row.agent,
    )


def leaderboard(rollups: Iterable[SuiteRollup], current: Mapping[str, int] | None = None) -> Leaderboard:
    """Rows per (suite, agent) grouped by suite and ranked best first; totals weight every test
    equally across suites (p95 is the worst suite's p95, the honest upper bound). With `current`
    (suite -> how many current tests it has), each row says how many of them have a result: a
    total's current tests are every suite's in `current`, so a version that ran part of them, or
    some suites only, shows what it misses."""
    items = list(rollups)
    known = dict(current or {})
    rows = sorted((_row(r.agent, r.suite, r, known) for r in items), key=lambda row: (row.suite, *_rank(row)))
    per_agent: dict[str, list[SuiteRollup]] = defaultdict(list)
    for r in items:
        per_agent[r.agent].append(r)
    totals = []
    for agent, rs in per_agent.items():
        passed, failed = sum(r.passed for r in rs), sum(r.failed for r in rs)
        weighted = [(r.mean_score, r.passed + r.failed) for r in rs if r.mean_score is not None]
        weight = sum(w for _, w in weighted)
        costs = [r.cost_usd for r in rs if r.cost_usd is not None]
        p95s = [r.latency_p95_ms for r in rs if r.latency_p95_ms is not None]
        totals.append(
            LeaderboardRow(
                agent=agent,
                suite="*",
                total=sum(r.total for r in rs),
                passed=passed,
                failed=failed,
                errored=sum(r.errored for r in rs),
                pass_rate=_ratio(passed, passed + failed),
                mean_score=(sum(s * w for s, w in weighted) / weight) if weight else None,
                cost_usd=round(sum(costs), 8) if costs else None,
                total_tokens=sum(r.total_tokens for r in rs),
                latency_p95_ms=max(p95s) if p95s else None,
                current_tests=sum(known.values()) if current is not None else None,
            )
        )
    return Leaderboard(rows=rows, totals=sorted(totals, key=_rank))
