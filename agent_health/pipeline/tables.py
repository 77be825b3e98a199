"""Readable numbers and tables for the pipeline's UI: rows with a column schema, so a transport
(the Dagster code location) shows real tables instead of markdown.

Rounding: pass rates as percentages to 0.1, scores and deltas to 4 significant digits, latencies
to 0.1 ms, costs to 4 significant digits."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_health.analysis.compare import Comparison
from agent_health.analysis.rollup import Leaderboard, LeaderboardRow, SuiteRollup


def sig(value: float | None, digits: int = 4) -> float | None:
    """`value` to `digits` significant digits (0.33333333333333337 -> 0.3333)."""
    if value is None or value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def percent(rate: float | None) -> float | None:
    """A 0..1 rate as a percentage to 0.1 (0.6667 -> 66.7)."""
    return None if rate is None else round(rate * 100, 1)


def ms(value: float | None) -> float | None:
    """Milliseconds to 0.1 ms."""
    return None if value is None else round(value, 1) + 0.0  # + 0.0: no "-0.0"


@dataclass(frozen=True)
class Column:
    """One column of a table: name, type (string, int, float, bool) and what it holds."""

    name: str
    type: str
    description: str


@dataclass(frozen=True)
class Table:
    """Rows (dicts keyed by column name) with their columns."""

    columns: tuple[Column, ...]
    rows: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.rows)


_AGENT = Column("agent", "string", "Agent version (KEY@VERSION).")
_SUITE = Column("suite", "string", "Suite (eval file), or * for the total over every suite.")
_COUNTS = (
    Column("passed", "int", "Tests that passed."),
    Column("failed", "int", "Tests that failed (a gate signal failed)."),
    Column("errored", "int", "Tests whose infrastructure failed; not in the pass rate."),
)
_PASS_RATE = Column("pass_rate_pct", "float", "passed / (passed + failed), in percent.")
_SCORE = Column("mean_score", "float", "Mean score (0-1) over graded tests.")


def leaderboard_table(board: Leaderboard, retired: Iterable[str] = ()) -> Table:
    """Totals first (suite *), then per suite, best first; retired versions are marked."""
    gone = set(retired)
    columns = (
        _AGENT,
        Column("status", "string", "current, or retired (no longer in the agent configuration)."),
        _SUITE,
        _PASS_RATE,
        _SCORE,
        *_COUNTS,
        Column("cost_usd", "float", "Estimated cost in USD (4 significant digits)."),
        Column("total_tokens", "int", "Agent tokens."),
        Column("latency_p95_ms", "float", "95th percentile test duration, ms."),
    )
    rows = [_board_row(r, "retired" if r.agent in gone else "current") for r in [*board.totals, *board.rows]]
    return Table(columns, rows)


def _board_row(r: LeaderboardRow, status: str) -> dict[str, Any]:
    return {
        "agent": r.agent,
        "status": status,
        "suite": r.suite,
        "pass_rate_pct": percent(r.pass_rate),
        "mean_score": sig(r.mean_score),
        "passed": r.passed,
        "failed": r.failed,
        "errored": r.errored,
        "cost_usd": sig(r.cost_usd),
        "total_tokens": r.total_tokens,
        "latency_p95_ms": ms(r.latency_p95_ms),
    }


def label_table(rollup: SuiteRollup) -> Table:
    """The rollup's per-label breakdown."""
    columns = (
        Column("label", "string", "Label carried by the tests."),
        Column("total", "int", "Tests with this label."),
        *_COUNTS,
        _PASS_RATE,
        _SCORE,
    )
    rows = [
        {
            "label": s.label,
            "total": s.total,
            "passed": s.passed,
            "failed": s.failed,
            "errored": s.errored,
            "pass_rate_pct": percent(s.pass_rate),
            "mean_score": sig(s.mean_score),
        }
        for s in rollup.labels.values()
    ]
    return Table(columns, rows)


def problem_table(rollup: SuiteRollup, failures: dict[str, str] | None = None) -> Table:
    """Failed and errored tests of a rollup, with the reason each one has."""
    columns = (
        Column("test_id", "string", "Test id."),
        Column("status", "string", "failed or errored."),
        Column("reason", "string", "Why: the failure, or the real error text."),
    )
    failures = failures or {}
    rows = [{"test_id": t, "status": "failed", "reason": failures.get(t, "")[:300]} for t in rollup.failing]
    rows += [{"test_id": e.test_id, "status": "errored", "reason": e.error[:300]} for e in rollup.errored_tests]
    return Table(columns, rows)


def recommendation_table(recommendations: Sequence[dict[str, Any]]) -> Table:
    """Suite-level recommendations, most widespread first."""
    columns = (
        Column("rule", "string", "Insight rule."),
        Column("severity", "string", "info, warning or critical."),
        Column("tests", "int", "Tests it fired on."),
        Column("cost_usd", "float", "Cost of those tests, USD."),
        Column("recommendation", "string", "What to change."),
    )
    rows = [
        {
            "rule": str(r.get("rule", "")),
            "severity": str(r.get("severity", "")),
            "tests": int(r.get("count", len(r.get("tests", ())))),
            "cost_usd": sig(r.get("cost_usd")),
            "recommendation": str(r.get("recommendation", ""))[:300],
        }
        for r in recommendations
    ]
    return Table(columns, rows)


def comparison_table(cmp: Comparison, limit: int = 500) -> Table:
    """Per test of a comparison: flips first, deltas candidate minus baseline."""
    columns = (
        Column("test_id", "string", "Test id."),
        Column("flip", "string", "regressed, fixed, newly_errored, recovered, added, removed or same."),
        Column("baseline", "string", "Status on the baseline version."),
        Column("candidate", "string", "Status on the candidate version."),
        Column("score_delta", "float", "Score change (4 significant digits)."),
        Column("cost_delta_usd", "float", "Cost change, USD (4 significant digits)."),
        Column("latency_delta_ms", "float", "Duration change, ms (0.1 ms)."),
        Column("tokens_delta", "int", "Agent token change."),
    )
    rows = [
        {
            "test_id": t.test_id,
            "flip": t.flip,
            "baseline": t.baseline_status or "-",
            "candidate": t.candidate_status or "-",
            "score_delta": sig(t.score_delta),
            "cost_delta_usd": sig(t.cost_delta_usd),
            "latency_delta_ms": ms(t.latency_delta_ms),
            "tokens_delta": t.tokens_delta,
        }
        for t in cmp.tests[:limit]
    ]
    return Table(columns, rows)
