"""Asset factory for one suite (one eval file):

    cases (per test: content hash)  ─┐
    agents/settings (per version)   ─┴─> [evaluate: results -> metrics, insights] -> rollup (per version)

`evaluate` is one step (a multi-asset that cannot be subset): whatever a user selects in the UI,
results, metrics and insights of a partition are produced together from the same in-memory
results, and nothing reads results back from storage to derive the other two. Results are written
through the result store (one run covers many partitions); each partition's outcome (status,
score, duration, tokens, cost, metrics, insights, and why it did not pass) is its evaluation of the
partitioned `test_outcome` check, so failed and errored tests show per partition at a glance."""

import os
import time
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetRecordsFilter,
    AssetSpec,
    AutomationCondition,
    BackfillPolicy,
    CodeReferencesMetadataValue,
    Failure,
    LocalFileCodeReference,
    MaterializeResult,
    MetadataValue,
    Output,
    asset,
    multi_asset,
)

from agent_health.analysis.compare import compare
from agent_health.analysis.insights import rollup_recommendations
from agent_health.analysis.rollup import rollup as build_rollup
from agent_health.errors import AgentHealthError
from agent_health.model import TestResult
from agent_health.pipeline import (
    Project,
    failure_reason,
    partition_metadata,
    percent,
    rollup_gates,
    run_partitions,
    sig,
)
from agent_health.pipeline.tables import label_table, problem_table, recommendation_table
from agent_health.stores import ResultKey, ResultStore, ResultSummary
from agent_health_dagster.dagster_env import DAGSTER_ENV
from agent_health_dagster.defs.beta import beta_api
from agent_health_dagster.defs.names import SuiteNames
from agent_health_dagster.defs.partitions import (
    AGENT_SETTINGS_KEY,
    AGENT_VERSIONS,
    agent_versions,
    bounded_ranges,
    multi_key,
    results_partitions,
    split_keys,
    tests_partitions,
)
from agent_health_dagster.defs.resources import AgentHealthResource, EvaluateConfig
from agent_health_dagster.defs.tables import table_value

OWNERS = ["team:agent-health"]
AGENT_POOL = "agent_health_agents"
OUTCOME_CHECK = "test_outcome"
ROLLUP_CHECKS = ("pass_rate_threshold", "errored_share_threshold", "no_regression")


def clean(meta: dict[str, Any]) -> dict[str, Any]:
    """Dagster metadata without None values (they have no metadata type)."""
    return {k: v for k, v in meta.items() if v is not None}


def current_results(store: ResultStore, suite: str, agent: str, test_ids: list[str]) -> list[ResultSummary]:
    """Summaries of the suite's current tests only (removed tests no longer count)."""
    return list(store.get_summaries(ResultKey(agent, suite, t) for t in test_ids))


def previous_version(agents: list[str], agent: str, configured: str | None) -> str | None:
    """Baseline of `agent`: the configured one, else the version of the same agent registered just
    before it (demo@v2 -> demo@v1); None for an agent's first version."""
    if configured:
        return configured if configured != agent else None
    same = [a for a in agents if a.partition("@")[0] == agent.partition("@")[0]]
    if agent not in same:
        return None
    i = same.index(agent)
    return same[i - 1] if i > 0 else None


def unknown_versions_message(project: Project, unknown: list[str]) -> str:
    """Why a run of versions the configuration does not know stops at once, and how to fix it."""
    known = project.config.agent_refs()
    key, _, version = unknown[0].partition("@")
    return (
        f"agent version(s) {', '.join(unknown)} are not in the agent configuration {project.config_file} "
        f"(configured: {', '.join(known) or 'none'}). The configuration is the source of truth for agent "
        f"versions: add it there, e.g. versions={{{version or 'v1'!r}: {{...}}}} on the agent {key!r}, "
        "and the agent_versions sensor registers it; partitions added by hand are not run."
    )


def code_references(eval_root: Path, source_file: str) -> dict[str, Any]:
    """Where the suite's eval file is: relative to the project (the configuration's folder), so the
    reference still makes sense wherever the code location is deployed."""
    with beta_api("code references are the only way the asset page links to the eval file"):
        return {
            "dagster/code_references": CodeReferencesMetadataValue(
                code_references=[
                    LocalFileCodeReference(
                        file_path=str((eval_root / source_file).resolve()), line_number=1, label=source_file
                    )
                ]
            )
        }


@dataclass
class SuiteAssets:
    """Everything built for one suite."""

    names: SuiteNames
    source_file: str
    tests_def: Any
    results_def: Any
    cases: AssetSpec
    evaluate: Any
    rollup: Any
    max_partitions_per_run: int | None = None

    def run_ranges(self, agents: list[str], tests: list[str]) -> list[tuple[list[str], list[str]]]:
        """agents x tests (each contiguous in registration order) as the ranges of runs of at most
        `max_partitions_per_run` partitions, as a backfill of them is split."""
        return bounded_ranges(agents, tests, self.max_partitions_per_run)

    @property
    def suite(self) -> str:
        return self.names.suite

    def key(self, name: str) -> AssetKey:
        return AssetKey([*self.names.prefix, name])

    @property
    def evaluate_keys(self) -> list[AssetKey]:
        """The (agent x test) assets the one evaluation step materializes together."""
        return [self.key("results"), self.key("metrics"), self.key("insights")]

    @property
    def definitions(self) -> list[Any]:
        return [self.cases, self.evaluate, self.rollup]


def rollup_condition() -> AutomationCondition:
    """A rollup partition runs once every result, metric and insight of its version is in and
    something upstream changed; never while its inputs are still being produced."""
    return AutomationCondition.eager()


def build_suite_assets(
    names: SuiteNames, source_file: str, eval_root: Path, max_partitions_per_run: int | None = None
) -> SuiteAssets:
    """`max_partitions_per_run` None: a backfill of any size is one run (the engine runs its tests
    concurrently); a number splits larger backfills into runs of at most that many partitions."""
    suite = names.suite
    prefix = list(names.prefix)
    group = names.group
    tests_def = tests_partitions(names.tests_partitions)
    multi = results_partitions(tests_def)

    def key(name: str) -> AssetKey:
        return AssetKey([*prefix, name])

    base_meta: dict[str, Any] = {"suite": suite, "eval_file": source_file, **code_references(eval_root, source_file)}

    cases = AssetSpec(
        key=key("cases"),
        partitions_def=tests_def,
        group_name=group,
        metadata=base_meta,
        tags={"agent_health/layer": "cases"},
        kinds={"python"},
        description=f"Test definitions of `{source_file}`, one partition per test. The eval-files sensor "
        "reports each test's content hash as its data version, so the results of a changed test show as stale.",
    )
    results_spec = AssetSpec(
        key=key("results"),
        partitions_def=multi,
        group_name=group,
        owners=OWNERS,
        kinds={"python", "json"},
        tags={"agent_health/layer": "results"},
        metadata=base_meta,
        deps=[key("cases"), AGENT_SETTINGS_KEY],
        description=f"One TestResult per (agent version x test) of `{source_file}`, stored by the result store. "
        "Each partition's status, score, tokens, cost and failure are on its test_outcome check.",
    )
    metrics_spec = AssetSpec(
        key=key("metrics"),
        partitions_def=multi,
        group_name=group,
        owners=OWNERS,
        kinds={"python"},
        tags={"agent_health/layer": "metrics"},
        deps=[key("results")],
        description="Derived metrics of each result (tokens, cost, latency, LLM and tool calls, redundant calls, "
        "tool errors, retries, steps), computed in the same step as the result.",
    )
    insights_spec = AssetSpec(
        key=key("insights"),
        partitions_def=multi,
        group_name=group,
        owners=OWNERS,
        kinds={"python"},
        tags={"agent_health/layer": "insights"},
        deps=[key("results")],
        description="Diagnoses of each result with evidence and a recommendation, computed in the same step.",
    )
    with beta_api(
        "partitioned checks keep each test's outcome on its own partition (PreviewWarning); a backfill policy "
        "is how many partitions run in one run (BetaWarning)"
    ):
        outcome_spec = AssetCheckSpec(
            OUTCOME_CHECK,
            asset=key("results"),
            partitions_def=multi,
            description="Per partition: passed when the test passed; failed (WARN) when it failed, failed (ERROR) "
            "when it errored. Metadata: status, score, duration, tokens, cost, metrics, insights, failure/error.",
        )
        policy = (
            BackfillPolicy.single_run()
            if not max_partitions_per_run
            else BackfillPolicy.multi_run(max_partitions_per_run)
        )

        @multi_asset(
            name=names.step,
            specs=[results_spec, metrics_spec, insights_spec],
            check_specs=[outcome_spec],
            partitions_def=multi,
            can_subset=False,
            backfill_policy=policy,
            pool=AGENT_POOL,
            description=f"Evaluate `{source_file}`: run the engine for exactly the partitions of the run, "
            "concurrently under one limit, store each result as it finishes, and derive metrics and insights.",
        )
        def evaluate(context: AssetExecutionContext, config: EvaluateConfig, agent_health: AgentHealthResource):
            project = agent_health.project()
            by_agent = split_keys(context.partition_keys)
            known = set(project.config.agent_refs())
            unknown = [a for a in by_agent if a not in known]
            if unknown:
                raise Failure(unknown_versions_message(project, unknown))
            started = time.time()
            try:
                out = run_partitions(project, suite, by_agent, agent_health.run_settings(config), None)
            except AgentHealthError as exc:  # a bad eval file or config: one clear message, not a traceback
                raise Failure(f"{suite}: {exc}") from exc
            counts = {s: sum(r.status == s for r in out) for s in ("passed", "failed", "errored")}
            context.log.info(f"{suite}: {len(out)} results stored in {project.store.location}: {counts}")
            context.log.info(worker_settings_message())
            # Metadata here is shared by every partition of the run; per-partition facts are on the
            # partition's test_outcome evaluation (one event per partition, no O(N^2) bookkeeping).
            yield MaterializeResult(asset_key=key("results"))
            yield MaterializeResult(asset_key=key("metrics"))
            yield MaterializeResult(asset_key=key("insights"))
            # Each evaluation targets its partition's new materialization, so the UI shows it current.
            targets = run_materializations(context, key("results"), started)
            for r in out:
                part = str(multi_key(r.agent, r.test_id))
                yield outcome_evaluation(key("results"), r, targets.get(part))
            # The check's output: its per-partition evaluations were logged above.
            yield Output(None, output_name=outcome_spec.get_python_identifier())

    with beta_api("checks that belong to a version's partition keep a regression visible (PreviewWarning)"):
        rollup_checks = [
            AssetCheckSpec(name, asset=key("rollup"), partitions_def=agent_versions, description=text)
            for name, text in zip(
                ROLLUP_CHECKS,
                (
                    "Pass rate at least the suite's threshold.",
                    "Errored share at most the threshold.",
                    "No test that passed on the baseline version (configured, else the previous one) fails on "
                    "this one.",
                ),
            )
        ]

        @asset(
            key=key("rollup"),
            tags={"agent_health/layer": "rollup"},
            partitions_def=agent_versions,
            group_name=group,
            owners=OWNERS,
            kinds={"python", "table"},
            deps=[key("metrics"), key("insights")],
            backfill_policy=BackfillPolicy.multi_run(1),
            automation_condition=rollup_condition(),
            check_specs=rollup_checks,
            description=f"Suite rollup of `{source_file}` per agent version: pass rate (errored excluded and "
            "counted), mean score, pass@k, tokens, cost, latency p50/p95, per-label table, failed and errored "
            "tests, recommendations; checks on this version's partition.",
        )
        def rollup(context: AssetExecutionContext, agent_health: AgentHealthResource) -> MaterializeResult:
            agent = context.partition_key
            store = agent_health.project().store
            tests = list(context.instance.get_dynamic_partitions(names.tests_partitions))
            results = current_results(store, suite, agent, tests)
            have = {r.test_id for r in results}
            missing = [t for t in tests if t not in have]
            if missing:
                raise Failure(
                    f"{suite} @ {agent}: no stored result for {len(missing)} of {len(tests)} test(s): "
                    + ", ".join(missing[:10])
                    + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
                    + f"; materialize {'/'.join(prefix)}/results for them first (e.g. a backfill for {agent})",
                    metadata={"missing": MetadataValue.json(missing[:500]), "missing_results": len(missing)},
                )
            ru = build_rollup(results, suite, agent, rollup_recommendations(results))
            agents = list(context.instance.get_dynamic_partitions(AGENT_VERSIONS))
            baseline = previous_version(agents, agent, agent_health.baseline)
            comparison = None
            if baseline:
                base = current_results(store, suite, baseline, tests)
                comparison = compare(base, results, baseline, agent) if base else None
            gates = rollup_gates(ru, agent_health.thresholds(), comparison)
            failed = [ResultKey(agent, suite, t) for t in ru.failing[:200]]
            failures = {r.test_id: failure_reason(r) for r in store.get_many(failed)}
            meta: dict[str, Any] = {
                **rollup_numbers(ru),
                "baseline": baseline or "none",
                "labels": table_value(label_table(ru)),
                "failed_and_errored": table_value(problem_table(ru, failures)),
                "recommendations": table_value(recommendation_table(ru.recommendations[:50])),
            }
            return MaterializeResult(
                metadata=clean(meta),
                check_results=[
                    AssetCheckResult(
                        check_name=g.name,
                        passed=g.passed,
                        description=g.description,
                        severity=AssetCheckSeverity.ERROR,
                        metadata={k: _meta_value(v) for k, v in g.metadata.items() if v is not None},
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
        evaluate=evaluate,
        rollup=rollup,
        max_partitions_per_run=max_partitions_per_run or None,
    )


def worker_settings_message() -> str:
    """The Dagster settings this run worker writes its events with (agent_health_dagster/dagster_env.py),
    so a deployment can see that they reach its run workers."""
    found = ", ".join(f"{name}={os.environ.get(name) or '(unset)'}" for name in DAGSTER_ENV)
    return f"Dagster event-log settings of this run worker: {found}"


def outcome_evaluation(results_key: AssetKey, r: TestResult, target: Any = None) -> AssetCheckEvaluation:
    """One partition's test_outcome: failed tests WARN, errored ones (infrastructure) ERROR;
    `target` is the materialization it evaluates."""
    meta = partition_metadata(r)
    why = meta.get("failure") or meta.get("error")
    return AssetCheckEvaluation(
        asset_key=results_key,
        check_name=OUTCOME_CHECK,
        passed=r.status == "passed",
        partition=str(multi_key(r.agent, r.test_id)),
        metadata=meta,
        severity=AssetCheckSeverity.ERROR if r.status == "errored" else AssetCheckSeverity.WARN,
        description=f"{r.status}: {why}"[:300] if why else r.status,
        target_materialization_data=target,
    )


def run_materializations(context: AssetExecutionContext, asset_key: AssetKey, since: float) -> dict[str, Any]:
    """partition -> the target (storage id, run, time) of this run's materialization of it; one
    query per 10,000 partitions."""
    out: dict[str, Any] = {}
    cursor = None
    records_filter = AssetRecordsFilter(asset_key=asset_key, after_timestamp=since - 1)
    while True:
        page = context.instance.fetch_materializations(records_filter, limit=10_000, cursor=cursor)
        for record in page.records:
            if record.run_id == context.run.run_id and record.partition_key and record.partition_key not in out:
                out[record.partition_key] = _TARGET(
                    storage_id=record.storage_id, run_id=record.run_id, timestamp=record.timestamp
                )
        if not page.has_more:
            return out
        cursor = page.cursor


# The type of AssetCheckEvaluation's public `target_materialization_data` argument; Dagster does not
# export it by name, so it is taken from that argument's annotation.
_TARGET = typing.get_args(typing.get_type_hints(AssetCheckEvaluation.__new__)["target_materialization_data"])[0]


def rollup_numbers(ru: Any) -> dict[str, Any]:
    """The rollup's figures as plottable numbers with readable precision."""
    return clean(
        {
            "total": ru.total,
            "passed": ru.passed,
            "failed": ru.failed,
            "errored": ru.errored,
            "pass_rate_pct": percent(ru.pass_rate),
            "errored_pct": percent(ru.errored_share),
            "mean_score": sig(ru.mean_score),
            "pass_at_k": sig(ru.pass_at_k),
            "total_tokens": ru.total_tokens,
            "cost_usd": sig(ru.cost_usd),
            "latency_p50_ms": None if ru.latency_p50_ms is None else round(ru.latency_p50_ms, 1),
            "latency_p95_ms": None if ru.latency_p95_ms is None else round(ru.latency_p95_ms, 1),
            "missing_results": 0,
        }
    )


def _meta_value(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        return MetadataValue.json(value)
    if isinstance(value, float):
        return sig(value)
    return value
