"""The JSON report of one CLI run: every result plus per-agent summaries (versioned)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from agent_health.model.result import SCHEMA_VERSION, TestResult
from agent_health.model.settings import Shard


class RunSummary(BaseModel):
    """Counts and totals over a set of results. Pass rate excludes errored tests."""

    agent: str = ""
    total: int = 0
    passed: int = 0
    failed: int = 0
    errored: int = 0
    pass_rate: float | None = Field(None, description="passed / (passed + failed); None when nothing graded.")
    mean_score: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    judge_tokens: int = 0
    judge_input_tokens: int = Field(0, description="Judge prompt tokens (judge_tokens = these + judge output).")
    judge_output_tokens: int = Field(0, description="Judge completion tokens.")
    cost_usd: float = Field(0.0, description="Estimated USD (agent + judge) of the results whose cost is known.")
    judge_cost_usd: float = Field(0.0, description="The judge part of cost_usd (agent cost = cost_usd - this).")
    unpriced: int = Field(
        0,
        description="Results whose cost is unknown (a model without a price, an agent that reported no usage): "
        "not in cost_usd.",
    )
    unreported: int = Field(
        0, description="Results whose agent reported no usage: their agent tokens are unknown, not in the counts."
    )
    duration_ms: float = Field(0.0, description="Wall-clock time of this agent's run.")
    not_run: int = Field(0, description="Tests of this agent version never started (fail-fast, interruption).")
    skipped: int = Field(
        0, description="Tests of this agent version left out because their stored result is up to date (--only)."
    )
    not_run_reason: str | None = Field(
        None, description="Why tests were not run: 'budget reached', 'fail-fast' or 'interrupted'."
    )

    @classmethod
    def of(cls, agent: str, results: Iterable[TestResult | Any], duration_ms: float = 0.0) -> RunSummary:
        tally = SummaryTally(agent)
        for r in results:
            tally.add(r)
        return tally.summary(duration_ms)


class SummaryTally:
    """A `RunSummary` built one result at a time: counts and sums only, never the results, so a
    run's memory stays flat in the number of tests."""

    def __init__(self, agent: str):
        self.agent = agent
        self.counts = {"passed": 0, "failed": 0, "errored": 0}
        self.scores = 0.0
        self.scored = 0
        self.input_tokens = self.output_tokens = self.total_tokens = self.judge_tokens = 0
        self.judge_input_tokens = self.judge_output_tokens = 0
        self.cost_usd = self.judge_cost_usd = 0.0
        self.unpriced = 0
        self.unreported = 0
        self.first_start: float | None = None
        self.last_end: float | None = None

    def add(self, r: TestResult | Any) -> None:
        """Count one result (a TestResult, or anything with its summary fields)."""
        # each field read once (a model's attribute read goes through BaseModel's __getattr__ hook)
        self.counts[r.status] += 1
        score = r.score
        if score is not None:
            self.scores += score
            self.scored += 1
        usage, judge = r.usage, r.judge_usage
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.total_tokens += usage.total_tokens
        self.judge_tokens += judge.total_tokens
        self.judge_input_tokens += judge.input_tokens
        self.judge_output_tokens += judge.output_tokens
        if getattr(usage, "unreported", False):
            self.unreported += 1
        cost = r.cost_usd
        if cost is None:
            self.unpriced += 1
        else:
            self.cost_usd += cost
            self.judge_cost_usd += getattr(r, "judge_cost_usd", None) or 0.0
        started = r.started_at
        end = started + r.duration_ms / 1000
        self.first_start = started if self.first_start is None else min(self.first_start, started)
        self.last_end = end if self.last_end is None else max(self.last_end, end)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def summary(
        self,
        duration_ms: float | None = None,
        not_run: int = 0,
        not_run_reason: str | None = None,
        skipped: int = 0,
    ) -> RunSummary:
        """The summary so far; `duration_ms` defaults to first start to last finish."""
        passed, failed = self.counts["passed"], self.counts["failed"]
        if duration_ms is None:
            span = (self.last_end - self.first_start) if self.first_start is not None and self.last_end else 0.0
            duration_ms = span * 1000
        return RunSummary(
            agent=self.agent,
            total=self.total,
            passed=passed,
            failed=failed,
            errored=self.counts["errored"],
            pass_rate=round(passed / (passed + failed), 4) if passed + failed else None,
            mean_score=round(self.scores / self.scored, 4) if self.scored else None,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.total_tokens,
            judge_tokens=self.judge_tokens,
            judge_input_tokens=self.judge_input_tokens,
            judge_output_tokens=self.judge_output_tokens,
            cost_usd=round(self.cost_usd, 6),
            judge_cost_usd=round(self.judge_cost_usd, 6),
            unpriced=self.unpriced,
            unreported=self.unreported,
            duration_ms=round(duration_ms, 1),
            not_run=not_run,
            skipped=skipped,
            not_run_reason=not_run_reason if not_run else None,
        )


class NotRunTest(BaseModel):
    """A test the run never started (budget reached, fail-fast, interruption): neither failed nor
    errored, left out of pass rates, listed by every reporter with its reason."""

    agent: str = Field(description="Agent version as KEY@VERSION.")
    test_id: str = Field(description="Stable test id.")
    name: str = Field(description="Full test name.")
    suite: str = Field(description="The eval file's suite.")
    reason: str = Field(description="Why it did not run: 'budget reached', 'fail-fast' or 'interrupted'.")


class BudgetSpend(BaseModel):
    """A run's spend against its budget (docs/budgets.md), counted from each result's usage and
    the price table."""

    max_cost_usd: float | None = Field(None, description="The budget of agent + judge spend, USD.")
    max_judge_cost_usd: float | None = Field(None, description="The budget of judge spend alone, USD.")
    max_tokens: int | None = Field(None, description="The budget of agent + judge tokens.")
    cost_usd: float = Field(
        0.0,
        description="Agent + judge spend of the tests that ran, and the agent runs of tests a judge call's "
        "estimate stopped (not run), USD.",
    )
    judge_cost_usd: float = Field(0.0, description="Judge spend alone, USD.")
    tokens: int = Field(0, description="Agent + judge tokens, counted as cost_usd is.")
    judge_cache_hits: int = Field(0, description="Judge verdicts from the cache: they cost nothing.")
    reached: str | None = Field(
        None, description="The limit that stopped the run (e.g. 'max_cost_usd'), or why spend became unknown."
    )
    shards: int | None = Field(
        None,
        description="In a merged report: the shards whose budgets these are. Each shard held its own spend to "
        "its own limits; the limits here are their sum, the spend the shards' together.",
    )

    def describe(self) -> str:
        """One line: spend against each limit set."""
        parts = []
        if self.max_cost_usd is not None:
            parts.append(f"cost ${self.cost_usd:.4f} of ${self.max_cost_usd:g}")
        if self.max_judge_cost_usd is not None:
            parts.append(f"judge cost ${self.judge_cost_usd:.4f} of ${self.max_judge_cost_usd:g}")
        if self.max_tokens is not None:
            parts.append(f"tokens {self.tokens:,} of {self.max_tokens:,}")
        line = "budget: " + ", ".join(parts)
        if self.shards:
            line += f" (the sum of {self.shards} shards' budgets: each shard was held to its own)"
        if self.judge_cache_hits:
            line += f"; {self.judge_cache_hits} judge cache hit(s), $0"
        if self.reached:
            line += f"; budget reached ({self.reached})"
        return line


class RunReport(BaseModel):
    """What `--reporter json` writes (and, without `results`, the last line of `--reporter jsonl`)."""

    schema_version: int = SCHEMA_VERSION
    eval_run_id: str | None = Field(None, description="The evaluation run (its manifest and results in the store).")
    started_at: float
    finished_at: float
    summaries: list[RunSummary] = Field(default_factory=list, description="One per agent version.")
    results: list[TestResult] = Field(default_factory=list)
    load_errors: list[str] = Field(default_factory=list, description="Eval files or tests that failed to load.")
    hook_errors: list[str] = Field(default_factory=list, description="after_all hooks that failed.")
    not_run: int = Field(0, description="Tests never started (--fail-fast, interruption), over every agent version.")
    skipped: int = Field(
        0, description="Tests left out as up to date (--only), over every agent version (see each summary)."
    )
    not_run_reason: str | None = Field(
        None, description="Why tests were not run: 'budget reached', 'fail-fast' or 'interrupted'."
    )
    not_run_tests: list[NotRunTest] = Field(
        default_factory=list, description="The tests never started, each with its reason."
    )
    budget: BudgetSpend | None = Field(None, description="Spend against the budget, when the run had one.")
    warnings: list[str] = Field(
        default_factory=list,
        description="Run-level warnings: gating judges demoted to observe because they miss judge.calibration; "
        "artifact copies the run's cap left out (ARTIFACTS_RUN_MAX).",
    )
    shard: Shard | None = Field(None, description="The shard of the selected tests this run ran (--shard), if any.")
    merged_from: list[str] = Field(
        default_factory=list,
        description="The eval runs whose shard reports `agent-health merge` combined into this one (in shard order).",
    )
