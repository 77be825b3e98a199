"""Asset factory for one suite (one eval file):

    cases (per test: content hash)   ─┐
    agents/settings (per version)    ─┴─> results (per version x test) ─> [metrics, insights, rollup] (per version)

`evaluate` is the one step that calls agents: it runs the engine for exactly the partitions of the
run and writes one event per partition, the results materialization, carrying that test's outcome
(status, score, why it did not pass, tokens, cost, duration) as metadata, so the partition a person
clicks says what happened. `summarize` derives, per agent version and from the store's summaries,
the metric distributions, the insight table and the rollup with its checks, in one step (a range of
versions is one run). Why these events, measured: docs/dagster.md#events-per-partition."""

import os
import time
from collections.abc import Iterator, Mapping
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
    AssetObservation,
    AssetSpec,
    BackfillPolicy,
    CodeReferencesMetadataValue,
    Failure,
    LocalFileCodeReference,
    MaterializeResult,
    MetadataValue,
    Output,
    multi_asset,
)

from agent_health.errors import AgentHealthError
from agent_health.pipeline import (
    UP_TO_DATE,
    Gate,
    Project,
    SuiteVersion,
    TestResult,
    freshness_gate,
    list_table,
    out_of_date_results,
    partition_metadata,
    run_partitions,
    sig,
    summarize_version,
)
from agent_health_dagster.dagster_env import DAGSTER_ENV
from agent_health_dagster.defs.beta import beta_api
from agent_health_dagster.defs.names import SuiteNames
from agent_health_dagster.defs.namespace import DEFAULT, Namespace
from agent_health_dagster.defs.partitions import (
    bounded_ranges,
    multi_key,
    results_partitions,
    split_keys,
    test_id_of,
    test_key,
    tests_partitions,
)
from agent_health_dagster.defs.resources import AgentHealthResource, EvaluateConfig
from agent_health_dagster.defs.tables import table_value

OWNERS = ["team:agent-health"]
AGENT_POOL = "agent_health_agents"
ROLLUP_CHECKS = ("pass_rate_threshold", "errored_share_threshold", "no_regression")
UP_TO_DATE_TEXT = (
    "Every result this asset reads is from its test's current definition and the current agent and judge "
    "settings. Fails (WARN) from the moment the eval-files or agent-versions sensor sees a change until the "
    "rerun results are refreshed in (Dagster shows no stale badge on partitioned assets; this check is where "
    "it shows)."
)


def clean(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Dagster metadata without None values (they have no metadata type)."""
    return {k: v for k, v in meta.items() if v is not None}


def unknown_versions_message(project: Project, unknown: list[str]) -> str:
    """Why a run of versions the configuration does not know stops at once, and how to fix it."""
    known = project.config.agent_refs()
    key, _, version = unknown[0].partition("@")
    return (
        f"agent version(s) {', '.join(unknown)} are not in the agent configuration {project.config_file} "
        f"(configured: {', '.join(known) or 'none'}). The configuration is the source of truth for agent "
        f"versions: add it there, e.g. versions={{{version or 'v1'!r}: {{...}}}} on the agent {key!r}, "
        "and the agent_versions sensor registers it; partitions added by hand are not run and the sensor "
        "removes them."
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
    summarize: Any
    max_partitions_per_run: int | None = None
    namespace: Namespace = DEFAULT

    def run_ranges(self, agents: list[str], tests: list[str]) -> list[tuple[list[str], list[str]]]:
        """agents x tests (test partition keys, each contiguous in registration order) as the
        ranges of runs of at most `max_partitions_per_run` partitions, as a backfill of them is split."""
        return bounded_ranges(agents, tests, self.max_partitions_per_run)

    @property
    def suite(self) -> str:
        return self.names.suite

    def key(self, name: str) -> AssetKey:
        return AssetKey([*self.names.prefix, name])

    @property
    def summary_keys(self) -> list[AssetKey]:
        """The per-version assets the summarize step materializes together."""
        return [self.key("metrics"), self.key("insights"), self.key("rollup")]

    def test_keys(self, instance: Any) -> list[str]:
        """The suite's registered test partition keys, in registration order."""
        return list(instance.get_dynamic_partitions(self.names.tests_partitions))

    def test_ids(self, instance: Any) -> list[str]:
        """The suite's registered tests as test ids (what the result store keys results by)."""
        return [test_id_of(self.suite, k) for k in self.test_keys(instance)]

    @property
    def definitions(self) -> list[Any]:
        return [self.cases, self.evaluate, self.summarize]


def build_suite_assets(
    names: SuiteNames,
    source_file: str,
    eval_root: Path,
    max_partitions_per_run: int | None = None,
    ns: Namespace = DEFAULT,
) -> SuiteAssets:
    """`max_partitions_per_run` None: a backfill of any size is one run (the engine runs its tests
    concurrently); a number splits larger backfills into runs of at most that many partitions.
    `ns`: the eval root's names (its agent versions, settings asset and resource key); `names`
    carry its key prefix already."""
    suite = names.suite
    prefix = list(names.prefix)
    group = names.group
    tests_def = tests_partitions(names.tests_partitions)
    agent_versions = ns.agent_versions_def
    multi = results_partitions(tests_def, agent_versions)

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
        description=f"Test definitions of `{source_file}`, one partition per test (its name within the suite). "
        "The eval-files sensor reports each test's content hash as its data version, so the results of a "
        "changed test show as stale, and requests their rerun.",
    )
    results_spec = AssetSpec(
        key=key("results"),
        partitions_def=multi,
        group_name=group,
        owners=OWNERS,
        kinds={"python", "json"},
        tags={"agent_health/layer": "results"},
        metadata=base_meta,
        deps=[key("cases"), ns.settings_key],
        description=f"One TestResult per (agent version x test) of `{source_file}`, stored by the result store. "
        "Each partition's materialization says how its test ended: status (passed, failed, errored), score, "
        "why it failed or the error, tokens, cost in USD and duration.",
    )
    with beta_api("a backfill policy is how many partitions run in one run (BetaWarning)"):
        policy = (
            BackfillPolicy.single_run()
            if not max_partitions_per_run
            else BackfillPolicy.multi_run(max_partitions_per_run)
        )

        @multi_asset(
            name=names.step,
            specs=[results_spec],
            partitions_def=multi,
            can_subset=False,
            backfill_policy=policy,
            pool=AGENT_POOL,
            required_resource_keys={ns.resource_key},
            description=f"Evaluate `{source_file}`: run the engine for exactly the partitions of the run, "
            "concurrently under one limit, and store each result as it finishes.",
        )
        def evaluate(context: AssetExecutionContext, config: EvaluateConfig) -> Iterator[MaterializeResult[Any]]:
            agent_health: AgentHealthResource = ns.resource(context)
            project = agent_health.project()
            by_agent = {
                agent: [test_id_of(suite, k) for k in keys]
                for agent, keys in split_keys(context.partition_keys).items()
            }
            known = set(project.config.agent_refs())
            unknown = [a for a in by_agent if a not in known]
            if unknown:
                raise Failure(unknown_versions_message(project, unknown))
            since = retry_started_at(context)
            step_start = time.time()
            try:
                out = run_partitions(project, suite, by_agent, agent_health.run_settings(config), None, since)
            except AgentHealthError as exc:  # a bad eval file or config: one clear message, not a traceback
                raise Failure(f"{suite}: {exc}") from exc
            counts = {s: sum(r.status == s for r in out) for s in ("passed", "failed", "errored")}
            context.log.info(f"{suite}: {len(out)} results stored in {project.store.location}: {counts}")
            if since is not None:
                reused = sum(r.started_at < step_start for r in out)
                context.log.info(
                    f"{suite}: a retry: {reused} result(s) stored by the run it retries were recorded without "
                    f"calling the agent again; {len(out) - reused} test(s) ran"
                )
            asked = sum(len(ids) for ids in by_agent.values())
            if len(out) < asked:  # a budget reached (docs/budgets.md): those partitions got no new result
                context.log.warning(
                    f"{suite}: {asked - len(out)} of {asked} test(s) not run (the run's budget was reached): "
                    "their partitions have no new result"
                )
            context.log.info(worker_settings_message())
            results_key = key("results")
            # One materialization per partition, written in batches, with Dagster's own provenance
            # (staleness, data versions, run lineage); then each partition's outcome as an
            # observation after it, which the partition's page shows under its materialization.
            # Why not per-partition metadata on the materialization: docs/dagster.md#events-per-partition.
            yield MaterializeResult(asset_key=results_key)
            for r in out:
                context.log_event(
                    AssetObservation(
                        asset_key=results_key,
                        partition=str(multi_key(r.agent, test_key(r.test_id))),
                        metadata=outcome_metadata(r),
                    )
                )

    def per_version(name: str, description: str) -> AssetSpec:
        return AssetSpec(
            key=key(name),
            partitions_def=agent_versions,
            group_name=group,
            owners=OWNERS,
            kinds={"python", "table"},
            tags={"agent_health/layer": name},
            deps=[key("results")],
            description=description,
        )

    summary_specs = [
        per_version(
            "metrics",
            f"Per agent version, the derived metrics of `{source_file}` over its current tests: tokens, cost, "
            "latency, LLM and tool calls, redundant calls, tool errors, retries and steps (total, mean, p50, p95, "
            "max). Each test's own metrics are on its stored result.",
        ),
        per_version(
            "insights",
            f"Per agent version, the insights of `{source_file}` grouped into recommendations, most widespread "
            "first. Each test's own insights, with their evidence, are on its stored result.",
        ),
        per_version(
            "rollup",
            f"Suite rollup of `{source_file}` per agent version: pass rate (errored excluded and counted), mean "
            "score, pass@k, tokens, cost, latency p50/p95, per-label table, failed and errored tests; checks on "
            "this version's partition.",
        ),
    ]
    with beta_api("checks that belong to a version's partition keep a regression visible (PreviewWarning)"):
        rollup_checks = [
            AssetCheckSpec(name, asset=key("rollup"), partitions_def=agent_versions, description=text)
            for name, text in zip(
                ROLLUP_CHECKS,
                (
                    "Pass rate at least the suite's threshold, with a stored result for every current test.",
                    "Errored share at most the threshold; never passes while current tests have no stored result.",
                    "No test that passed on the baseline version (configured, else the previous one) fails on "
                    "this one; never passes while the baseline or this version lacks results for current tests.",
                ),
            )
        ]
        # Of the whole asset (every configured version), not per partition: the sensors report it the
        # moment they see a change, and Dagster stores one runless evaluation per check and partition.
        rollup_checks.append(AssetCheckSpec(UP_TO_DATE, asset=key("rollup"), description=UP_TO_DATE_TEXT))

        @multi_asset(
            name=f"{names.flat}__summarize",
            specs=summary_specs,
            check_specs=rollup_checks,
            partitions_def=agent_versions,
            can_subset=False,
            # No backfill policy: a backfill then launches one run per version, tagged with its
            # partition (a policy's runs, even of one partition, carry a range instead), and only a
            # run of one partition gives each check result its version's partition and the
            # materialization it checked, which is what the check's Partitions tab and the asset's
            # overview show (docs/dagster.md#checks-and-the-partition-they-belong-to).
            backfill_policy=None,
            required_resource_keys={ns.resource_key},
            description=f"Summarize `{source_file}` for one agent version, from the stored summaries: "
            "metrics, insights and the rollup with its checks.",
        )
        def summarize(
            context: AssetExecutionContext,
        ) -> Iterator[AssetCheckResult | AssetCheckEvaluation | MaterializeResult[Any] | Output[None]]:
            agent_health: AgentHealthResource = ns.resource(context)
            project = agent_health.project()
            tests = [test_id_of(suite, k) for k in context.instance.get_dynamic_partitions(names.tests_partitions)]
            registered = list(context.instance.get_dynamic_partitions(ns.agent_versions))
            configured = project.config.agent_refs()
            current = project.current_state([suite], configured)
            stale: dict[str, list[str]] = {}
            versions: dict[str, SuiteVersion] = {}
            for agent in context.partition_keys:
                sv = summarize_version(
                    project.store,
                    suite,
                    agent,
                    tests,
                    registered,
                    agent_health.thresholds(),
                    agent_health.baseline,
                    current,
                )
                versions[agent] = sv
                stale |= {f"{agent}: {t}": why for t, why in sv.stale.items() if agent in configured}
            others = [a for a in configured if a not in context.partition_keys]
            stale |= out_of_date_results(project.store, {suite: tests}, current, others)
            freshness = freshness_gate(suite, stale)
            if context.has_partition_key:  # how the project launches it: sensors, backfills, headless, UI
                [sv] = versions.values()
                for asset_key, meta in summary_metadata(sv, key).items():
                    yield MaterializeResult(asset_key=asset_key, metadata=meta)
                # After the rollup's materialization: Dagster records each result on this version's
                # partition, as the check of that materialization.
                for g in [*sv.gates, freshness]:
                    yield check_result(key("rollup"), g)
                return
            context.log.warning(
                f"{suite}: this run summarizes {len(versions)} agent versions at once: their check results are in "
                "each check's history, but only a run of one version sets the check's status on that version's "
                "partition (the refresh sensor, backfills and the headless job run one version per run)"
            )
            for agent, sv in versions.items():
                for asset_key, meta in summary_metadata(sv, key).items():
                    context.add_asset_metadata(meta, asset_key=asset_key, partition_key=agent)
            for spec in summary_specs:
                yield MaterializeResult(asset_key=spec.key)
            for agent, sv in versions.items():
                yield from gate_evaluations(key("rollup"), agent, sv.gates)
            yield from gate_evaluations(key("rollup"), None, [freshness])
            for check in rollup_checks:  # the evaluations, each on its version's partition, were logged above
                yield Output(None, output_name=check.get_python_identifier())

    return SuiteAssets(
        names=names,
        source_file=source_file,
        tests_def=tests_def,
        results_def=multi,
        cases=cases,
        evaluate=evaluate,
        summarize=summarize,
        max_partitions_per_run=max_partitions_per_run or None,
        namespace=ns,
    )


# Run tags Dagster sets on a retry (the run-retries daemon's, `dagster/retry_number`) and on a
# re-execution from failure (`dagster/is_resume_retry`); Dagster exports no constants for them.
RETRY_NUMBER_TAG = "dagster/retry_number"
RESUME_RETRY_TAG = "dagster/is_resume_retry"
# A launch can say itself whether stored results are reused: "true" on any run, "false" on a retry.
REUSE_TAG = "agent_health/reuse_stored_results"


def retry_started_at(context: AssetExecutionContext) -> float | None:
    """When the run this one retries was created (its root run), if this run is a retry: an
    automatic retry of a run that died, or a re-execution from failure; else None. A retry records
    the results that run already stored instead of calling their agents again (docs/dagster.md).
    The tag `agent_health/reuse_stored_results` ("true" / "false") overrides either way."""
    run = context.run
    tags = run.tags
    wanted = tags.get(REUSE_TAG)
    retry = bool(tags.get(RETRY_NUMBER_TAG)) or tags.get(RESUME_RETRY_TAG) == "true"
    if wanted == "false" or not (retry or wanted == "true"):
        return None
    root = run.root_run_id or run.parent_run_id or run.run_id
    record = context.instance.get_run_record_by_id(root)
    if record is None:  # the root run was deleted: nothing tells which results it stored
        return None
    created: float = record.create_timestamp.timestamp()
    return created


def worker_settings_message() -> str:
    """The Dagster settings this run worker writes its events with (agent_health_dagster/dagster_env.py),
    so a deployment can see that they reach its run workers."""
    found = ", ".join(f"{name}={os.environ.get(name) or '(unset)'}" for name in DAGSTER_ENV)
    return f"Dagster event-log settings of this run worker: {found}"


def outcome_metadata(r: TestResult) -> dict[str, Any]:
    """A results partition's metadata: how its test ended, first (status, then why), then the figures."""
    meta = partition_metadata(r)
    why = meta.pop("failure", None) or meta.pop("error", None)
    head: dict[str, Any] = {"status": meta.pop("status")}
    if why:
        head["failure" if r.status == "failed" else "error"] = MetadataValue.text(why)
    return {**head, **meta}


def summary_metadata(sv: SuiteVersion, key: Any) -> dict[AssetKey, dict[str, Any]]:
    """Metadata of one version's metrics, insights and rollup partitions."""
    rollup_meta: dict[str, Any] = {
        **sv.rollup_numbers(),
        "baseline": sv.baseline or "none",
        **{name: table_value(t) for name, t in sv.tables().items()},
    }
    return {
        key("metrics"): clean({**sv.metric_numbers(), "tests": sv.tests, "metrics": table_value(sv.metrics_table())}),
        key("insights"): {
            "recommendations": table_value(sv.insights_table()),
            "rules": len(sv.rollup.recommendations),
        },
        key("rollup"): clean(rollup_meta),
    }


def check_fields(g: Gate) -> dict[str, Any]:
    """What a gate's check result says: passed, why, the evidence as metadata. A gate fails as
    ERROR unless the library made it a warning: the up_to_date check (out-of-date results are on
    their way to be rerun) and, under AGENT_HEALTH_MISSING_EVIDENCE=warn, a gate that only lacks
    results."""
    return {
        "passed": g.passed,
        "description": g.description[:1000],
        "severity": AssetCheckSeverity.WARN if g.warn else AssetCheckSeverity.ERROR,
        "metadata": clean({k: _meta_value(k, v) for k, v in g.metadata.items()}),
    }


def check_result(asset_key: AssetKey, g: Gate) -> AssetCheckResult:
    """A gate as its check's result in a run of one partition: Dagster records it on that partition
    (for a partitioned check) and as the check of the materialization logged before it."""
    return AssetCheckResult(asset_key=asset_key, check_name=g.name, **check_fields(g))


def gate_evaluations(asset_key: AssetKey, partition: str | None, gates: list[Gate]) -> Iterator[AssetCheckEvaluation]:
    """Each gate as its check's evaluation on `partition` (None: of the whole asset), for runs
    that cannot use `check_result`: sensors (runless) and runs over several partitions."""
    for g in gates:
        yield AssetCheckEvaluation(asset_key=asset_key, check_name=g.name, partition=partition, **check_fields(g))


# Check metadata holding a share (0..1), shown in percent.
SHARES = {"pass_rate", "errored_share", "threshold", "pass_rate_delta"}


def _meta_value(name: str, value: Any) -> Any:
    """Lists as one-column tables (not JSON blobs); numbers as text (shares in percent), because
    Dagster plots a check's numeric metadata over every evaluation on one time axis: the versions'
    figures would zigzag and constant thresholds plot as lines. The figures plot per version on the
    rollup's own metadata."""
    if isinstance(value, list):
        return table_value(list_table("test_id", [str(v) for v in value], name)) if value else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if name in SHARES:
        return MetadataValue.text(f"{value * 100:+.1f} pts" if name == "pass_rate_delta" else f"{value * 100:.1f}%")
    return MetadataValue.text(str(value) if isinstance(value, int) else str(sig(value)))
