"""Across suites: the leaderboard (every agent version x suite) and the baseline-vs-candidate
comparison. Both read the result store for the suites' current tests."""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dagster import AssetExecutionContext, AutomationCondition, Config, Failure, MaterializeResult, MetadataValue, asset
from pydantic import Field

from agent_health.analysis.compare import compare, default_pair
from agent_health.analysis.rollup import leaderboard as build_leaderboard
from agent_health.analysis.rollup import rollup as build_rollup
from agent_health.errors import ConfigError
from agent_health.stores.atomic import write_atomic
from definitions.defs.partitions import AGENT_VERSIONS
from definitions.defs.resources import AgentHealthResource
from definitions.defs.suite_assets import OWNERS, SuiteAssets, clean, current_results

GROUP = "benchmark"


def write_report(state: Path, name: str, payload: dict[str, Any]) -> Path:
    """Atomically write `<state>/benchmark/<name>.json` for tools that want the latest table."""
    folder = state / "benchmark"
    write_atomic(folder / f"{name}.json", json.dumps(payload, indent=1, default=str))
    return folder / f"{name}.json"


class ComparisonConfig(Config):
    """Which versions to compare (run config); defaults come from the resource, then the two newest."""

    baseline: str | None = Field(None, description="Baseline agent version, e.g. demo@v1.")
    candidate: str | None = Field(None, description="Candidate agent version, e.g. demo@v2.")


def build_benchmark_assets(suites: Sequence[SuiteAssets]) -> list[Any]:
    rollup_keys = [s.key("rollup") for s in suites]

    @asset(
        key=["benchmark", "leaderboard"],
        group_name=GROUP,
        owners=OWNERS,
        kinds={"python", "table"},
        tags={"agent_health/layer": "benchmark"},
        deps=rollup_keys,
        automation_condition=AutomationCondition.eager(),
        description="Every agent version x suite in one table (pass rate, mean score, cost, tokens, p95), "
        "plus a total per agent version.",
    )
    def leaderboard(context: AssetExecutionContext, agent_health: AgentHealthResource) -> MaterializeResult:
        project = agent_health.project()
        agents = list(context.instance.get_dynamic_partitions(AGENT_VERSIONS))
        rollups = []
        for s in suites:
            tests = list(context.instance.get_dynamic_partitions(s.names.tests_partitions))
            for agent in agents:
                results = current_results(project.store, s.suite, agent, tests)
                if results:
                    rollups.append(build_rollup(results, s.suite, agent))
        board = build_leaderboard(rollups)
        write_report(project.config.state_path, "leaderboard", board.model_dump())
        meta: dict[str, Any] = {"leaderboard": MetadataValue.md(board.to_markdown()), "rows": len(board.rows)}
        for row in board.totals:
            if row.pass_rate is not None:
                meta[f"pass_rate {row.agent}"] = round(row.pass_rate, 4)
            if row.cost_usd is not None:
                meta[f"cost_usd {row.agent}"] = row.cost_usd
        return MaterializeResult(metadata=clean(meta))

    @asset(
        key=["benchmark", "comparison"],
        group_name=GROUP,
        owners=OWNERS,
        kinds={"python", "table"},
        tags={"agent_health/layer": "benchmark"},
        deps=rollup_keys,
        automation_condition=AutomationCondition.eager(),
        description="A baseline agent version against a candidate: per-test flips, score, cost and latency "
        "deltas. Baseline and candidate are configurable; default the two newest versions.",
    )
    def comparison(
        context: AssetExecutionContext, config: ComparisonConfig, agent_health: AgentHealthResource
    ) -> MaterializeResult:
        project = agent_health.project()
        agents = list(context.instance.get_dynamic_partitions(AGENT_VERSIONS))
        try:
            base, cand = default_pair(
                agents, config.baseline or agent_health.baseline, config.candidate or agent_health.candidate
            )
        except ConfigError as exc:
            raise Failure(str(exc)) from exc
        base_results, cand_results = [], []
        for s in suites:
            tests = list(context.instance.get_dynamic_partitions(s.names.tests_partitions))
            base_results += current_results(project.store, s.suite, base, tests)
            cand_results += current_results(project.store, s.suite, cand, tests)
        cmp = compare(base_results, cand_results, base, cand)
        write_report(project.config.state_path, "comparison", cmp.model_dump())
        counts = cmp.counts()
        meta = {
            "comparison": MetadataValue.md(cmp.to_markdown()),
            "baseline": base,
            "candidate": cand,
            "regressed": len(cmp.regressions),
            "fixed": len(cmp.fixes),
            "tests": len(cmp.tests),
            "flips": MetadataValue.json(counts),
            "pass_rate_delta": cmp.pass_rate_delta,
            "mean_score_delta": cmp.mean_score_delta,
            "cost_delta_usd": cmp.cost_delta_usd,
            "latency_delta_ms": cmp.latency_delta_ms,
            "regressed_tests": MetadataValue.json([t.test_id for t in cmp.regressions][:200]),
        }
        return MaterializeResult(metadata=clean(meta))

    return [leaderboard, comparison]
