"""Readable numbers and tables for the pipeline's UI: rows with a column schema, so a transport
(the Dagster code location) shows real tables instead of markdown.

Rounding: pass rates as percentages to 0.1, scores and deltas to 4 significant digits, latencies
to 0.1 ms, costs to 4 significant digits."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_health.analysis.compare import Comparison, TestDelta
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
    """Totals first (suite *), then per suite, best first; retired versions are marked, and so are
    versions whose current tests are not all stored (in the agent cell and the missing columns)."""
    gone = set(retired)
    columns = (
        Column(
            "agent",
            "string",
            "Agent version (KEY@VERSION), marked '(N of M missing)' when N of its M current tests have no stored "
            "result: its figures then cover part of the suite only.",
        ),
        Column("status", "string", "current, or retired (no longer in the agent configuration)."),
        _SUITE,
        _PASS_RATE,
        _SCORE,
        *_COUNTS,
        Column("coverage_pct", "float", "Current tests with a stored result (passed + failed + errored), in percent."),
        Column("missing", "int", "Current tests without a stored result."),
        Column("current_tests", "int", "Current (registered) tests of the suite, or of every suite for *."),
        Column("cost_usd", "float", "Estimated cost in USD (4 significant digits)."),
        Column("total_tokens", "int", "Agent tokens."),
        Column("latency_p95_ms", "float", "95th percentile test duration, ms."),
    )
    rows = [_board_row(r, "retired" if r.agent in gone else "current") for r in [*board.totals, *board.rows]]
    return Table(columns, rows)


def _board_row(r: LeaderboardRow, status: str) -> dict[str, Any]:
    return {
        "agent": r.label,
        "status": status,
        "suite": r.suite,
        "pass_rate_pct": percent(r.pass_rate),
        "mean_score": sig(r.mean_score),
        "passed": r.passed,
        "failed": r.failed,
        "errored": r.errored,
        "coverage_pct": percent(r.coverage),
        "missing": r.missing,
        "current_tests": r.current_tests,
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


COMPARISON_ROWS = 500  # rows of a comparison table; the rest are in the comparison's JSON report


def importance(t: TestDelta) -> int:
    """Where a test's row goes in a cut comparison table: regressions, then errors (newly errored,
    still errored), then missing results (no candidate result, no baseline result), then fixes,
    noise, recoveries, tests failing on both sides, and last the tests passing on both."""
    if t.flip == "same":
        return {"errored": 2, "failed": 8}.get(t.candidate_status or "", 9)
    return {"regressed": 0, "newly_errored": 1, "removed": 3, "added": 4, "fixed": 5, "noise": 6}.get(t.flip, 7)


def comparison_table(cmp: Comparison, limit: int = COMPARISON_ROWS, rest: str | None = None) -> Table:
    """Per test of a comparison, the most important first (`importance`), deltas candidate minus
    baseline. Cut at `limit` rows: a last row then says how many are not shown and where they are
    (`rest`, e.g. the JSON report's path)."""
    columns = (
        Column("test_id", "string", "Test id."),
        Column(
            "flip",
            "string",
            "regressed, fixed, noise, newly_errored, recovered, added (no baseline result), removed (no candidate "
            "result) or same; `not shown` on the last row of a cut table.",
        ),
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
        for t in sorted(cmp.tests, key=importance)[:limit]
    ]
    if len(cmp.tests) > limit:
        rows.append(
            {
                "test_id": cut_note(limit, len(cmp.tests), rest),
                "flip": "not shown",
                "baseline": "-",
                "candidate": "-",
                "score_delta": None,
                "cost_delta_usd": None,
                "latency_delta_ms": None,
                "tokens_delta": None,
            }
        )
    return Table(columns, rows)


def cut_note(shown: int, total: int, rest: str | None = None) -> str:
    """'500 of 2,018 rows shown (regressions, errors and missing results first); the other 1,518 in
    <rest>'."""
    where = f" in {rest}" if rest else " not shown"
    return (
        f"{shown:,} of {total:,} rows shown (regressions, errors and missing results first); "
        f"the other {total - shown:,}{where}"
    )
