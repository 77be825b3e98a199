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
from agent_health.pipeline.tables import Column, Table, comparison_table, leaderboard_table, ms, percent, sig
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

    def numbers(self) -> dict[str, Any]:
        """Row count (every row: the per-version totals and the per-suite rows) and one plottable
        pass rate and cost per version."""
        out: dict[str, Any] = {
            "rows": len(self.board.totals) + len(self.board.rows),
            "retired": ", ".join(self.retired) or "none",
        }
        for row in self.board.totals:
            if row.pass_rate is not None:
                out[f"pass_rate_pct {row.agent}"] = percent(row.pass_rate)
            if row.cost_usd is not None:
                out[f"cost_usd {row.agent}"] = sig(row.cost_usd)
        return out


def build_leaderboard(
    store: ResultStore,
    suites: SuiteTests,
    agents: Iterable[str],
    configured: Iterable[str],
    current: Current | None = None,
) -> LeaderboardView:
    """Every registered agent version x suite with stored results; versions no longer configured
    are kept, marked retired. With `current`, results of configured versions produced from older
    test definitions or settings are listed as out of date."""
    known = set(configured)
    rollups = []
    stale: dict[str, list[str]] = {}
    for suite, tests in suites.items():
        for agent in agents:
            results = current_summaries(store, suite, agent, tests)
            if results:
                rollups.append(rollup(results, suite, agent))
                if current is not None and agent in known:
                    stale |= {f"{agent}: {t}": why for t, why in out_of_date(results, current).items()}
    board = leaderboard(rollups)
    return LeaderboardView(board, sorted({r.agent for r in board.totals} - known), stale)


@dataclass(frozen=True)
class VersionComparison:
    candidate: str
    baseline: str | None
    comparison: Comparison | None

    def numbers(self) -> dict[str, Any]:
        cmp = self.comparison
        if cmp is None:
            return {"baseline": "none", "candidate": self.candidate, "note": f"{self.candidate} is the first version"}
        return {
            "baseline": cmp.baseline,
            "candidate": cmp.candidate,
            "regressed": len(cmp.regressions),
            "fixed": len(cmp.fixes),
            "noise": len(cmp.noise),
            "tests": len(cmp.tests),
            "baseline_pass_rate_pct": percent(cmp.baseline_pass_rate),
            "candidate_pass_rate_pct": percent(cmp.candidate_pass_rate),
            "pass_rate_delta_pct": percent(cmp.pass_rate_delta),
            "mean_score_delta": sig(cmp.mean_score_delta),
            "cost_delta_usd": sig(cmp.cost_delta_usd),
            "latency_delta_ms": ms(cmp.latency_delta_ms),
        }

    def tables(self) -> dict[str, Table]:
        cmp = self.comparison
        if cmp is None:
            return {}
        return {
            "comparison": comparison_table(cmp),
            "flips": flips_table(cmp),
            "statistics": stats_table(cmp),
            "regressed_tests": list_table(
                "test_id", cmp.regressed_tests[:500], "Passed on the baseline, fails or errors on the candidate."
            ),
        }


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


def compare_version(
    store: ResultStore,
    suites: SuiteTests,
    registered: Sequence[str],
    candidate: str,
    baseline: str | None = None,
) -> VersionComparison:
    """`candidate` against its baseline (`baseline`, else the version of the same agent registered
    before it) over every suite's current tests."""
    base = previous_version(registered, candidate, baseline)
    if base is None:
        return VersionComparison(candidate, None, None)
    base_results, cand_results = [], []
    for suite, tests in suites.items():
        base_results += current_summaries(store, suite, base, tests)
        cand_results += current_summaries(store, suite, candidate, tests)
    return VersionComparison(candidate, base, compare(base_results, cand_results, base, candidate))
