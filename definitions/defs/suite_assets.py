"""Asset factory for one suite (one eval file):

    cases (observed: content hash per test) -> results (runs the engine) -> metrics, insights
    -> rollup (per agent version, with checks)

Results are written through the result store, not an IO manager: Dagster's IO managers store one
object per output, and one run here covers many partitions. Each partition still gets its own
materialization event with status, score, duration, tokens and cost."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetDep,
    AssetExecutionContext,
    AssetKey,
    AutomationCondition,
    BackfillPolicy,
    CodeReferencesMetadataValue,
    DataVersion,
    DataVersionsByPartition,
    Failure,
    LocalFileCodeReference,
    MaterializeResult,
    MetadataValue,
    MultiToSingleDimensionPartitionMapping,
    asset,
    observable_source_asset,
)

from agent_health.analysis.compare import compare
from agent_health.analysis.insights import derive_insights, rollup_recommendations
from agent_health.analysis.rollup import rollup as build_rollup
from agent_health.errors import AgentHealthError
from agent_health.model import TestResult
from agent_health.pipeline import partition_metadata, rollup_gates, run_partitions
from agent_health.stores import ResultKey, ResultStore, ResultSummary
from definitions.defs.metadata import add_partition_metadata
from definitions.defs.names import SuiteNames
from definitions.defs.partitions import (
    AGENT_DIM,
    AGENT_VERSIONS,
    TEST_DIM,
    agent_versions,
    results_partitions,
    split_keys,
    tests_partitions,
)
from definitions.defs.resources import AgentHealthResource

OWNERS = ["team:agent-health"]
AGENT_POOL = "agent_health_agents"
RESULTS_CHECK = "no_errored_tests"
ROLLUP_CHECKS = ("pass_rate_threshold", "errored_share_threshold", "no_regression")


def clean(meta: dict[str, Any]) -> dict[str, Any]:
    """Dagster metadata without None values (they have no metadata type)."""
    return {k: v for k, v in meta.items() if v is not None}


def current_results(store: ResultStore, suite: str, agent: str, test_ids: list[str]) -> list[ResultSummary]:
    """Summaries of the suite's current tests only (removed tests no longer count)."""
    return list(store.get_summaries(ResultKey(agent, suite, t) for t in test_ids))


def previous_version(agents: list[str], agent: str, configured: str | None) -> str | None:
    """Baseline of `agent`: the configured one, else the version added just before it."""
    if configured:
        return configured if configured != agent else None
    if agent not in agents:
        return None
    i = agents.index(agent)
    return agents[i - 1] if i > 0 else None


@dataclass
class SuiteAssets:
    """Everything built for one suite."""

    names: SuiteNames
    source_file: str
    tests_def: Any
    results_def: Any
    cases: Any
    results: Any
    metrics: Any
    insights: Any
    rollup: Any

    @property
    def suite(self) -> str:
        return self.names.suite

    def key(self, name: str) -> AssetKey:
        return AssetKey([*self.names.prefix, name])

    @property
    def evaluate_keys(self) -> list[AssetKey]:
        """The (agent x test) assets one evaluation run materializes together."""
        return [self.key("results"), self.key("metrics"), self.key("insights")]

    @property
    def definitions(self) -> list[Any]:
        return [self.cases, self.results, self.metrics, self.insights, self.rollup]


def build_suite_assets(
    names: SuiteNames, source_file: str, eval_root: Path, max_partitions_per_run: int | None = None
) -> SuiteAssets:
    """`max_partitions_per_run` None: a backfill of any size is one run (the engine runs its tests
    concurrently); a number splits backfills into runs of at most that many partitions."""
    suite = names.suite
    policy = (
        BackfillPolicy.single_run() if not max_partitions_per_run else BackfillPolicy.multi_run(max_partitions_per_run)
    )
    prefix = list(names.prefix)
    group = names.group
    tests_def = tests_partitions(names.tests_partitions)
    multi = results_partitions(tests_def)
    key = lambda n: AssetKey([*prefix, n])  # noqa: E731
    eval_path = (eval_root / source_file).resolve()
    code_ref = {
        "dagster/code_references": CodeReferencesMetadataValue(
            code_references=[
                LocalFileCodeReference(file_path=str(eval_path), line_number=1, label=f"eval file {source_file}")
            ]
        )
    }
    base_meta: dict[str, Any] = {"suite": suite, "eval_file": MetadataValue.path(str(eval_path)), **code_ref}
    per_agent = MultiToSingleDimensionPartitionMapping(partition_dimension_name=AGENT_DIM)
    per_test = MultiToSingleDimensionPartitionMapping(partition_dimension_name=TEST_DIM)

    @observable_source_asset(
        key=key("cases"),
        partitions_def=tests_def,
        group_name=group,
        metadata=base_meta,
        tags={"agent_health/layer": "cases"},
        description=f"Test definitions of `{source_file}`: one partition per test, its data version is the "
        "test's content hash, so results of a changed test show as stale.",
    )
    def cases(agent_health: AgentHealthResource) -> DataVersionsByPartition:
        loaded = agent_health.project().load_suite(suite)
        if loaded.errors and not loaded.tests:
            raise Failure(str(loaded.errors[0]))
        return DataVersionsByPartition({t.id: DataVersion(t.case.content_hash[:16]) for t in loaded.tests})

    @asset(
        key=key("results"),
        tags={"agent_health/layer": "results"},
        partitions_def=multi,
        group_name=group,
        owners=OWNERS,
        kinds={"python", "json"},
        deps=[AssetDep(key("cases"), partition_mapping=per_test)],
        backfill_policy=policy,
        pool=AGENT_POOL,
        metadata=base_meta,
        check_specs=[
            AssetCheckSpec(
                RESULTS_CHECK,
                asset=key("results"),
                description="Flags tests that errored (agent, judge or fixture failed).",
            )
        ],
        description=f"One TestResult per (agent version x test) of `{source_file}`. Runs the engine for exactly "
        "the partitions of the run, concurrently, and stores each result as it finishes.",
    )
    def results(context: AssetExecutionContext, agent_health: AgentHealthResource) -> MaterializeResult:
        project = agent_health.project()
        keys = list(context.partition_keys)
        by_agent = split_keys(keys)
        key_of = {}
        for k in keys:
            ((a, ts),) = split_keys([k]).items()
            key_of[(a, ts[0])] = k

        by_partition: dict[str, dict[str, Any]] = {}

        def on_result(r: TestResult) -> None:
            by_partition[key_of[(r.agent, r.test_id)]] = partition_metadata(r)

        try:
            out = run_partitions(project, suite, by_agent, agent_health.run_settings(), on_result)
        except AgentHealthError as exc:  # a bad eval file or config: one clear message, not a traceback
            raise Failure(f"{suite}: {exc}") from exc
        finally:
            add_partition_metadata(context, key("results"), by_partition)
        errored = sorted(r.test_id + f" @ {r.agent}" for r in out if r.status == "errored")
        counts = {s: sum(r.status == s for r in out) for s in ("passed", "failed", "errored")}
        context.log.info(f"{suite}: {len(out)} results stored in {project.store.location}: {counts}")
        return MaterializeResult(
            check_results=[
                AssetCheckResult(
                    check_name=RESULTS_CHECK,
                    passed=not errored,
                    severity=AssetCheckSeverity.WARN,
                    description=f"{len(errored)} of {len(out)} results errored" if errored else "no test errored",
                    metadata={"errored": MetadataValue.json(errored[:200])} if errored else {},
                )
            ]
        )

    def _stored(context: AssetExecutionContext, agent_health: AgentHealthResource):
        store = agent_health.project().store
        missing = []
        for k in context.partition_keys:
            ((a, ts),) = split_keys([k]).items()
            r = store.get(ResultKey(a, suite, ts[0]))
            if r is None:
                missing.append(str(k))
            else:
                yield k, r
        if missing:
            raise Failure(
                f"{suite}: no stored result for {len(missing)} partition(s), e.g. {missing[:3]}; "
                f"materialize {'/'.join(prefix)}/results for them first"
            )

    @asset(
        key=key("metrics"),
        tags={"agent_health/layer": "metrics"},
        partitions_def=multi,
        group_name=group,
        owners=OWNERS,
        kinds={"python"},
        deps=[key("results")],
        backfill_policy=policy,
        description="Derived metrics of each result: tokens, cost, latency, LLM and tool calls, redundant "
        "calls, tool errors, retries, steps.",
    )
    def metrics(context: AssetExecutionContext, agent_health: AgentHealthResource) -> None:
        by_partition = {}
        for k, r in _stored(context, agent_health):
            numeric = {
                name: v for name, v in r.metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
            }
            numeric["duration_ms"] = round(r.duration_ms, 3)
            by_partition[k] = clean(
                {**numeric, "tool_histogram": MetadataValue.json(r.metrics.get("tool_histogram") or {})}
            )
        add_partition_metadata(context, key("metrics"), by_partition)

    @asset(
        key=key("insights"),
        tags={"agent_health/layer": "insights"},
        partitions_def=multi,
        group_name=group,
        owners=OWNERS,
        kinds={"python"},
        deps=[key("results")],
        backfill_policy=policy,
        description="Diagnoses of each result with evidence and a recommendation (offline rules; an "
        "optional synthesizer adds more).",
    )
    def insights(context: AssetExecutionContext, agent_health: AgentHealthResource) -> None:
        by_partition = {}
        for k, r in _stored(context, agent_health):
            found = r.insights or derive_insights(r)
            text = "\n".join(f"- **{i.severity}** `{i.rule}`: {i.summary}. {i.recommendation}" for i in found)
            by_partition[k] = {
                "insights": len(found),
                "rules": ", ".join(i.rule for i in found) or "-",
                "details": MetadataValue.md(text or "no findings"),
            }
        add_partition_metadata(context, key("insights"), by_partition)

    @asset(
        key=key("rollup"),
        tags={"agent_health/layer": "rollup"},
        partitions_def=agent_versions,
        group_name=group,
        owners=OWNERS,
        kinds={"python"},
        deps=[
            AssetDep(key("metrics"), partition_mapping=per_agent),
            AssetDep(key("insights"), partition_mapping=per_agent),
        ],
        backfill_policy=BackfillPolicy.multi_run(1),
        automation_condition=AutomationCondition.eager(),
        check_specs=[
            AssetCheckSpec(n, asset=key("rollup"), description=d)
            for n, d in zip(
                ROLLUP_CHECKS,
                (
                    "Pass rate at least the suite's threshold.",
                    "Errored share at most the threshold.",
                    "No test that passed on the baseline version fails on this one (names the tests).",
                ),
            )
        ],
        description=f"Suite rollup of `{source_file}` per agent version: pass rate (errored excluded and "
        "counted), mean score, pass@k, tokens, cost, latency p50/p95, per-label breakdown, "
        "failing and errored tests.",
    )
    def rollup(context: AssetExecutionContext, agent_health: AgentHealthResource) -> MaterializeResult:
        agent = context.partition_key
        store = agent_health.project().store
        tests = list(context.instance.get_dynamic_partitions(names.tests_partitions))
        results = current_results(store, suite, agent, tests)
        ru = build_rollup(results, suite, agent, rollup_recommendations(results))
        agents = list(context.instance.get_dynamic_partitions(AGENT_VERSIONS))
        baseline = previous_version(agents, agent, agent_health.baseline)
        comparison = None
        if baseline:
            base = current_results(store, suite, baseline, tests)
            comparison = compare(base, results, baseline, agent) if base else None
        gates = rollup_gates(ru, agent_health.thresholds(), comparison)
        meta: dict[str, Any] = {
            **ru.metrics(),
            "missing_results": len(tests) - len(results),
            "summary": MetadataValue.md(ru.to_markdown()),
            "failing": MetadataValue.json(ru.failing[:200]),
            "recommendations": MetadataValue.json(ru.recommendations[:20]),
        }
        return MaterializeResult(
            metadata=clean(meta),
            check_results=[
                AssetCheckResult(
                    check_name=g.name,
                    passed=g.passed,
                    description=g.description,
                    severity=AssetCheckSeverity.ERROR,
                    metadata={
                        k: MetadataValue.json(v) if isinstance(v, (list, dict)) else v
                        for k, v in g.metadata.items()
                        if v is not None
                    },
                )
                for g in gates
            ],
        )

    return SuiteAssets(
        names=names,
        source_file=source_file,
        tests_def=tests_def,
        results_def=multi,
        cases=cases,
        results=results,
        metrics=metrics,
        insights=insights,
        rollup=rollup,
    )
