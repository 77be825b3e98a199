"""Across suites: the leaderboard of every agent version x suite, and one version compared with its
baseline over every suite; with the tables and numbers a pipeline shows for them. Both read the
store's summaries of each suite's current tests."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_health.analysis.compare import Comparison, compare
from agent_health.analysis.rollup import Leaderboard, leaderboard, rollup
from agent_health.files import write_atomic
from agent_health.pipeline.freshness import Current, freshness_gate, out_of_date
from agent_health.pipeline.gates import Gate
from agent_health.pipeline.tables import (
    COMPARISON_ROWS,
    Column,
    Table,
    comparison_table,
    cut_note,
    leaderboard_table,
    ms,
    percent,
    sig,
)
from agent_health.pipeline.version import current_summaries, list_table, previous_version
from agent_health.stores import ResultStore

SuiteTests = Mapping[str, Sequence[str]]  # suite -> its current test ids


def write_report(state: Path, name: str, payload: dict[str, Any]) -> Path:
    """Atomically write `<state>/benchmark/<name>.json` for tools that want the latest table."""
    path = state / "benchmark" / f"{name}.json"
    write_atomic(path, json.dumps(payload, indent=1, default=str))
    return path


@dataclass(frozen=True)
class LeaderboardView:
    board: Leaderboard
    retired: list[str]
    stale: dict[str, list[str]] = field(default_factory=dict)  # "agent: test id" -> why out of date

    def freshness(self) -> Gate:
        return freshness_gate("the leaderboard", self.stale)

    def table(self) -> Table:
        return leaderboard_table(self.board, self.retired)

    def incomplete(self) -> str:
        """The versions whose total misses current tests, with how many: 'demo@v3 (2,001 of 2,018
        missing)', or 'none'."""
        return ", ".join(r.label for r in self.board.totals if r.missing) or "none"

    def numbers(self) -> dict[str, Any]:
        """Row count (every row: the per-version totals and the per-suite rows), the versions with
        missing results, and per version one plottable pass rate, cost, count of missing results
        and coverage (percent of the current tests with a stored result)."""
        out: dict[str, Any] = {
            "rows": len(self.board.totals) + len(self.board.rows),
            "retired": ", ".join(self.retired) or "none",
            "incomplete": self.incomplete(),
        }
        for row in self.board.totals:
            if row.pass_rate is not None:
                out[f"pass_rate_pct {row.agent}"] = percent(row.pass_rate)
            if row.cost_usd is not None:
                out[f"cost_usd {row.agent}"] = sig(row.cost_usd)
            if row.missing is not None:
                out[f"missing_results {row.agent}"] = row.missing
                out[f"coverage_pct {row.agent}"] = percent(row.coverage)
        return out


def build_leaderboard(
    store: ResultStore,
    suites: SuiteTests,
    agents: Iterable[str],
    configured: Iterable[str],
    current: Current | None = None,
) -> LeaderboardView:
    """Every registered agent version with stored results x suite; versions no longer configured
    are kept, marked retired. Each row says how many of the suite's current tests have a stored
    result (a total: of every suite's), and a version with results in some suites has a row, of
    none, in the others: a version that ran part of the tests is marked, not ranked as if whole.
    With `current`, results of configured versions produced from older test definitions or
    settings are listed as out of date."""
    known = set(configured)
    versions = list(agents)
    rollups = []
    stale: dict[str, list[str]] = {}
    empty: dict[str, list[str]] = {}  # agent -> suites it has no result in
    for suite, tests in suites.items():
        for agent in versions:
            results = current_summaries(store, suite, agent, tests)
            if results:
                rollups.append(rollup(results, suite, agent))
                if current is not None and agent in known:
                    stale |= {f"{agent}: {t}": why for t, why in out_of_date(results, current).items()}
            else:
                empty.setdefault(agent, []).append(suite)
    seen = {r.agent for r in rollups}
    rollups += [rollup([], suite, agent) for agent, gone in empty.items() if agent in seen for suite in gone]
    board = leaderboard(rollups, {suite: len(tests) for suite, tests in suites.items()})
    return LeaderboardView(board, sorted({r.agent for r in board.totals} - known), stale)


@dataclass(frozen=True)
class VersionComparison:
    """A candidate version against its baseline over every suite's current tests. Beside the
    comparison: how many current tests there are and which have no stored result on each side
    (tests missing on both are in both lists; the comparison itself holds only tests one side
    has), and where the whole comparison was written (`report`, when `compare_version` wrote it)."""

    candidate: str
    baseline: str | None
    comparison: Comparison | None
    current_tests: int = 0
    baseline_missing: list[str] = field(default_factory=list)  # current tests without a baseline result
    candidate_missing: list[str] = field(default_factory=list)  # current tests without a candidate result
    report: str | None = None  # the JSON report holding every row

    @property
    def complete(self) -> bool:
        """Both sides have a result for every current test."""
        return not self.baseline_missing and not self.candidate_missing

    def coverage_line(self) -> str:
        """How much of the current tests the comparison covers, in one sentence."""
        if self.baseline is None:
            return f"{self.candidate} is the first version"
        if self.complete:
            return f"complete: every one of the {self.current_tests:,} current test(s) has a result on both sides"
        sides = ((self.baseline_missing, f"the baseline {self.baseline}"), (self.candidate_missing, self.candidate))
        gaps = [f"{len(ids):,} {'has' if len(ids) == 1 else 'have'} no result on {who}" for ids, who in sides if ids]
        compared = self.current_tests - len(set(self.baseline_missing) | set(self.candidate_missing))
        return f"partial: {compared:,} of {self.current_tests:,} current test(s) compared; {', '.join(gaps)}"

    def rows_note(self, limit: int = COMPARISON_ROWS) -> str:
        """Whether the comparison table shows every row: 'all 18 rows shown', or '500 of 2,018 rows
        shown (...); the other 1,518 in <report>'."""
        total = len(self.comparison.tests) if self.comparison is not None else 0
        return f"all {total:,} rows shown" if total <= limit else cut_note(limit, total, self._rest())

    def _rest(self) -> str:
        if self.report:
            return self.report
        return f"`agent-health compare {self.baseline} {self.candidate} --json`"

    def numbers(self, limit: int = COMPARISON_ROWS) -> dict[str, Any]:
        """The comparison's figures, how many current tests each side misses, and whether the
        comparison table (cut at `limit`) shows every row."""
        cmp = self.comparison
        if self.baseline is None:
            return {"baseline": "none", "candidate": self.candidate, "note": f"{self.candidate} is the first version"}
        coverage = {
            "current_tests": self.current_tests,
            "baseline_missing_results": len(self.baseline_missing),
            "candidate_missing_results": len(self.candidate_missing),
            "coverage": self.coverage_line(),
        }
        if cmp is None:
            return {"baseline": self.baseline, "candidate": self.candidate, **coverage}
        return {
            "baseline": cmp.baseline,
            "candidate": cmp.candidate,
            **coverage,
            "regressed": len(cmp.regressions),
            "fixed": len(cmp.fixes),
            "noise": len(cmp.noise),
            "tests": len(cmp.tests),
            "compared_tests": cmp.compared_tests,
            "comparison_rows": self.rows_note(limit),
            "baseline_pass_rate_pct": percent(cmp.baseline_pass_rate),
            "candidate_pass_rate_pct": percent(cmp.candidate_pass_rate),
            "pass_rate_delta_pct": percent(cmp.pass_rate_delta),
            "mean_score_delta": sig(cmp.mean_score_delta),
            "cost_delta_usd": sig(cmp.cost_delta_usd),
            "latency_delta_ms": ms(cmp.latency_delta_ms),
        }

    def tables(self, limit: int = COMPARISON_ROWS) -> dict[str, Table]:
        """The comparison (cut at `limit` rows, most important first, with a last row saying so),
        flip counts, statistics, regressed tests, and the current tests without a result on either
        side (when any)."""
        cmp = self.comparison
        if cmp is None:
            return {}
        out = {
            "comparison": comparison_table(cmp, limit, rest=self._rest()),
            "flips": flips_table(cmp),
            "statistics": stats_table(cmp),
            "regressed_tests": list_table(
                "test_id", cmp.regressed_tests[:500], "Passed on the baseline, fails or errors on the candidate."
            ),
        }
        for name, ids, who in (
            ("baseline_missing", self.baseline_missing, f"the baseline {self.baseline}"),
            ("candidate_missing", self.candidate_missing, self.candidate),
        ):
            if ids:
                out[name] = list_table("test_id", ids[:500], f"Current test without a stored result on {who}.")
        return out


def flips_table(cmp: Comparison) -> Table:
    columns = (Column("flip", "string", "How a test changed."), Column("tests", "int", "Tests."))
    return Table(columns, [{"flip": k, "tests": v} for k, v in sorted(cmp.flip_counts.items())])


def stats_table(cmp: Comparison) -> Table:
    """The statistics `agent-health compare` prints, rounded: rates in percent to 0.1, the rest to
    4 significant digits (the JSON report keeps them unrounded)."""
    columns = (
        Column("statistic", "string", "Name, as in `agent-health compare --json`."),
        Column("value", "string", "Rounded: rates in percent to 0.1, the rest to 4 significant digits."),
    )
    rows = [{"statistic": name, "value": format_statistic(name, v)} for name, v in cmp.stats_summary().items()]
    return Table(columns, rows)


def format_statistic(name: str, value: Any) -> str:
    """One comparison statistic as the pipeline shows it: pass rates in percent to 0.1, other
    numbers to 4 significant digits, lists comma-separated, missing ones as '-'."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{percent(value)}%" if "pass_rate" in name else f"{sig(value):g}"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "-"
    return str(value)


def comparison_report_name(candidate: str) -> str:
    """The name `compare_version` writes a candidate's comparison under (`write_report`)."""
    return f"comparison-{candidate.replace('@', '_')}"


def compare_version(
    store: ResultStore,
    suites: SuiteTests,
    registered: Sequence[str],
    candidate: str,
    baseline: str | None = None,
    state: Path | None = None,
) -> VersionComparison:
    """`candidate` against its baseline (`baseline`, else the version of the same agent registered
    before it) over every suite's current tests, with the current tests each side has no stored
    result for. With `state`, the whole comparison is written to
    `<state>/benchmark/comparison-<candidate>.json` and the view says so (`report`)."""
    base = previous_version(registered, candidate, baseline)
    current = sum(len(tests) for tests in suites.values())
    if base is None:
        return VersionComparison(candidate, None, None, current)
    base_results, cand_results = [], []
    base_missing: list[str] = []
    cand_missing: list[str] = []
    for suite, tests in suites.items():
        b = current_summaries(store, suite, base, tests)
        c = current_summaries(store, suite, candidate, tests)
        have_b, have_c = {r.test_id for r in b}, {r.test_id for r in c}
        base_missing += [t for t in tests if t not in have_b]
        cand_missing += [t for t in tests if t not in have_c]
        base_results += b
        cand_results += c
    cmp = compare(base_results, cand_results, base, candidate)
    report = None
    if state is not None:
        report = str(write_report(state, comparison_report_name(candidate), cmp.model_dump(mode="json")))
    return VersionComparison(candidate, base, cmp, current, base_missing, cand_missing, report)
