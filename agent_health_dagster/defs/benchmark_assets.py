"""Across suites: the leaderboard (every agent version x suite, retired versions marked) and the
comparison of each version against its baseline, kept per candidate version. Both read the
result store for the suites' current tests."""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dagster import (
    AssetExecutionContext,
    AutomationCondition,
    Config,
    MaterializeResult,
    MetadataValue,
    asset,
)
from pydantic import Field

from agent_health.analysis.compare import compare
from agent_health.analysis.rollup import leaderboard as build_leaderboard
from agent_health.analysis.rollup import rollup as build_rollup
from agent_health.files import write_atomic
from agent_health.pipeline import percent, sig
from agent_health.pipeline.tables import comparison_table, leaderboard_table
from agent_health_dagster.defs.partitions import AGENT_VERSIONS, agent_versions
from agent_health_dagster.defs.resources import AgentHealthResource
from agent_health_dagster.defs.suite_assets import OWNERS, SuiteAssets, clean, current_results, previous_version
from agent_health_dagster.defs.tables import table_value

GROUP = "benchmark"


def write_report(state: Path, name: str, payload: dict[str, Any]) -> Path:
    """Atomically write `<state>/benchmark/<name>.json` for tools that want the latest table."""
    folder = state / "benchmark"
    write_atomic(folder / f"{name}.json", json.dumps(payload, indent=1, default=str))
    return folder / f"{name}.json"


def follow_rollups() -> AutomationCondition:
    """Materialize after any rollup it reads changed, once none of them is still running (a
    version or suite without results yet does not hold the others back)."""
    return (
        AutomationCondition.any_deps_updated().since_last_handled()
        & ~AutomationCondition.any_deps_in_progress()
        & ~AutomationCondition.in_progress()
    )


class ComparisonConfig(Config):
    """Override the baseline of a comparison run (default: the resource's, else the previous version)."""

    baseline: str | None = Field(None, description="Baseline agent version, e.g. demo@v1.")


def build_benchmark_assets(suites: Sequence[SuiteAssets]) -> list[Any]:
    rollup_keys = [s.key("rollup") for s in suites]

    @asset(
        key=["benchmark", "leaderboard"],
        group_name=GROUP,
        owners=OWNERS,
        kinds={"python", "table"},
        tags={"agent_health/layer": "benchmark"},
        deps=rollup_keys,
        automation_condition=follow_rollups(),
        description="Every agent version x suite in one table (pass rate, mean score, cost, tokens, p95), a total "
        "per version first; versions no longer in the agent configuration stay, marked retired.",
    )
    def leaderboard(context: AssetExecutionContext, agent_health: AgentHealthResource) -> MaterializeResult:
        project = agent_health.project()
        agents = list(context.instance.get_dynamic_partitions(AGENT_VERSIONS))
        configured = set(project.config.agent_refs())
        rollups = []
        for s in suites:
            tests = list(context.instance.get_dynamic_partitions(s.names.tests_partitions))
            for agent in agents:
                results = current_results(project.store, s.suite, agent, tests)
                if results:
                    rollups.append(build_rollup(results, s.suite, agent))
        board = build_leaderboard(rollups)
        retired = sorted({r.agent for r in board.totals} - configured)
        write_report(project.config.state_path, "leaderboard", {**board.model_dump(), "retired": retired})
        meta: dict[str, Any] = {
            "leaderboard": table_value(leaderboard_table(board, retired)),
            "rows": len(board.rows),
            "retired": ", ".join(retired) or "none",
        }
        for row in board.totals:  # one plottable number per version
            if row.pass_rate is not None:
                meta[f"pass_rate_pct {row.agent}"] = percent(row.pass_rate)
            if row.cost_usd is not None:
                meta[f"cost_usd {row.agent}"] = sig(row.cost_usd)
        return MaterializeResult(metadata=clean(meta))

    @asset(
        key=["benchmark", "comparison"],
        group_name=GROUP,
        owners=OWNERS,
        kinds={"python", "table"},
        tags={"agent_health/layer": "benchmark"},
        partitions_def=agent_versions,
        deps=rollup_keys,
        automation_condition=follow_rollups(),
        description="Per candidate version: its results against its baseline (the configured one, else the "
        "version registered before it): per-test flips, score, cost and latency deltas, and the statistics of "
        "`agent-health compare` (Wilson intervals, McNemar p, bootstrap score delta, noise) under stats/.",
    )
    def comparison(
        context: AssetExecutionContext, config: ComparisonConfig, agent_health: AgentHealthResource
    ) -> MaterializeResult:
        project = agent_health.project()
        cand = context.partition_key
        agents = list(context.instance.get_dynamic_partitions(AGENT_VERSIONS))
        base = previous_version(agents, cand, config.baseline or agent_health.baseline)
        if base is None:
            return MaterializeResult(
                metadata={"baseline": "none", "candidate": cand, "note": f"{cand} is the first version"}
            )
        base_results, cand_results = [], []
        for s in suites:
            tests = list(context.instance.get_dynamic_partitions(s.names.tests_partitions))
            base_results += current_results(project.store, s.suite, base, tests)
            cand_results += current_results(project.store, s.suite, cand, tests)
        cmp = compare(base_results, cand_results, base, cand)
        write_report(project.config.state_path, f"comparison-{cand.replace('@', '_')}", cmp.model_dump())
        meta = {
            "comparison": table_value(comparison_table(cmp)),
            "baseline": base,
            "candidate": cand,
            "regressed": len(cmp.regressions),
            "fixed": len(cmp.fixes),
            "tests": len(cmp.tests),
            "flips": MetadataValue.json(cmp.counts()),
            "baseline_pass_rate_pct": percent(cmp.baseline_pass_rate),
            "candidate_pass_rate_pct": percent(cmp.candidate_pass_rate),
            "pass_rate_delta_pct": percent(cmp.pass_rate_delta),
            "mean_score_delta": sig(cmp.mean_score_delta),
            "cost_delta_usd": sig(cmp.cost_delta_usd),
            "latency_delta_ms": None if cmp.latency_delta_ms is None else round(cmp.latency_delta_ms, 1),
            "regressed_tests": MetadataValue.json([t.test_id for t in cmp.regressions][:200]),
            # the statistics `agent-health compare` prints (Wilson, McNemar, bootstrap, noise), unrounded
            **{
                f"stats/{k}": MetadataValue.json(v) if isinstance(v, list) else v
                for k, v in cmp.stats_summary().items()
            },
        }
        return MaterializeResult(metadata=clean(meta))

    return [leaderboard, comparison]
