"""Across suites: the leaderboard (every agent version x suite, retired versions marked) and the
comparison of each version against its baseline, kept per candidate version. The library computes
both (agent_health.pipeline.benchmark); these assets map them to metadata."""

from collections.abc import Iterator, Sequence
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetSpec,
    Config,
    MaterializeResult,
    Output,
    asset,
    multi_asset,
)
from pydantic import Field

from agent_health.pipeline import (
    UP_TO_DATE,
    build_leaderboard,
    compare_version,
    freshness_gate,
    out_of_date_results,
    write_report,
)
from agent_health_dagster.defs.beta import beta_api
from agent_health_dagster.defs.namespace import DEFAULT, Namespace
from agent_health_dagster.defs.resources import AgentHealthResource
from agent_health_dagster.defs.suite_assets import (
    OWNERS,
    UP_TO_DATE_TEXT,
    SuiteAssets,
    check_result,
    clean,
    gate_evaluations,
)
from agent_health_dagster.defs.tables import table_value

GROUP = "benchmark"


class ComparisonConfig(Config):
    """Override the baseline of a comparison run (default: the resource's, else the previous version)."""

    baseline: str | None = Field(None, description="Baseline agent version, e.g. demo@v1.")


def suite_tests(context: AssetExecutionContext, suites: Sequence[SuiteAssets]) -> dict[str, list[str]]:
    """Each suite's current test ids, as registered."""
    return {s.suite: s.test_ids(context.instance) for s in suites}


def build_benchmark_assets(suites: Sequence[SuiteAssets], ns: Namespace = DEFAULT) -> list[Any]:
    rollup_keys = [s.key("rollup") for s in suites]
    leaderboard_key, comparison_key = ns.leaderboard_key, ns.comparison_key
    agent_versions = ns.agent_versions_def

    @asset(
        key=leaderboard_key,
        group_name=ns.name(GROUP),
        owners=OWNERS,
        kinds={"python", "table"},
        tags={"agent_health/layer": "benchmark"},
        deps=rollup_keys,
        check_specs=[AssetCheckSpec(UP_TO_DATE, asset=leaderboard_key, description=UP_TO_DATE_TEXT)],
        required_resource_keys={ns.resource_key},
        description="Every agent version x suite in one table (pass rate, mean score, cost, tokens, p95), a total "
        "per version first; versions no longer in the agent configuration stay, marked retired.",
    )
    # Bare MaterializeResult: Dagster takes only the bare class for an asset with check outputs (not [Any]).
    def leaderboard(context: AssetExecutionContext) -> MaterializeResult:  # type: ignore[type-arg]
        agent_health: AgentHealthResource = ns.resource(context)
        project = agent_health.project()
        agents = list(context.instance.get_dynamic_partitions(ns.agent_versions))
        tests = suite_tests(context, suites)
        current = project.current_state(tests, agents)
        view = build_leaderboard(project.store, tests, agents, project.config.agent_refs(), current)
        write_report(project.config.state_path, "leaderboard", {**view.board.model_dump(), "retired": view.retired})
        return MaterializeResult(
            metadata=clean({"leaderboard": table_value(view.table()), **view.numbers()}),
            check_results=[check_result(leaderboard_key, view.freshness())],
        )

    with beta_api("checks that belong to a version's partition (PreviewWarning)"):
        freshness = AssetCheckSpec(UP_TO_DATE, asset=comparison_key, description=UP_TO_DATE_TEXT)

        @multi_asset(
            name=ns.name("benchmark__comparison"),
            specs=[
                AssetSpec(
                    comparison_key,
                    group_name=ns.name(GROUP),
                    owners=OWNERS,
                    kinds={"python", "table"},
                    tags={"agent_health/layer": "benchmark"},
                    partitions_def=agent_versions,
                    deps=rollup_keys,
                    description="Per candidate version: its results against its baseline (the configured one, "
                    "else the version registered before it): per-test flips, score, cost and latency deltas, and "
                    "the statistics of `agent-health compare` (Wilson intervals, McNemar p, bootstrap score delta, "
                    "noise), rounded.",
                )
            ],
            check_specs=[freshness],
            partitions_def=agent_versions,
            backfill_policy=None,  # a backfill runs one version per run, tagged with it, as the refresh sensor
            required_resource_keys={ns.resource_key},
        )
        def comparison(
            context: AssetExecutionContext, config: ComparisonConfig
        ) -> Iterator[AssetCheckResult | AssetCheckEvaluation | MaterializeResult[Any] | Output[None]]:
            agent_health: AgentHealthResource = ns.resource(context)
            project = agent_health.project()
            registered = list(context.instance.get_dynamic_partitions(ns.agent_versions))
            tests = suite_tests(context, suites)
            metadata: dict[str, dict[str, Any]] = {}
            for cand in context.partition_keys:
                baseline = config.baseline or agent_health.baseline
                view = compare_version(project.store, tests, registered, cand, baseline, project.config.state_path)
                tables = {name: table_value(t) for name, t in view.tables().items()}
                metadata[cand] = clean({**view.numbers(), **tables})
            current = project.current_state(tests, project.config.agent_refs())
            stale = out_of_date_results(project.store, tests, current)
            gate = freshness_gate("the comparisons", stale)
            if context.has_partition_key:  # one version per run: its figures on its materialization
                yield MaterializeResult(asset_key=comparison_key, metadata=metadata[context.partition_key])
                yield check_result(comparison_key, gate)
                return
            for cand, meta in metadata.items():
                context.add_asset_metadata(meta, partition_key=cand)
            yield from gate_evaluations(comparison_key, None, [gate])
            yield MaterializeResult(asset_key=comparison_key)
            yield Output(None, output_name=freshness.get_python_identifier())

    return [leaderboard, comparison]
