"""Per suite a `rejudge__<suite>` job: re-judge the stored results of the selected (agent version x
test) partitions through the library's `rejudge` (stored agent runs replayed: the evaluate step
stays the only one that calls the agent), optionally with another judge model. Each re-judged
partition gets a new materialization of its results carrying the new outcome (the stored result
changed); the refresh sensor then refreshes the rollups, the comparison and the leaderboard."""

from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetMaterialization,
    Failure,
    JobDefinition,
    OpExecutionContext,
    job,
    op,
)
from pydantic import Field

from agent_health.errors import AgentHealthError
from agent_health.pipeline import TestResult, rejudge_partitions
from agent_health_dagster.defs.partitions import multi_key, split_keys, test_id_of, test_key
from agent_health_dagster.defs.resources import AgentHealthResource, job_config_fields
from agent_health_dagster.defs.suite_assets import SuiteAssets, outcome_metadata


class RejudgeConfig(job_config_fields("rejudge")):  # type: ignore[misc]
    """How to re-judge (the Launchpad's config of a `rejudge__*` run); partitions pick what. One
    field per run setting declared for the rejudge job (agent_health.model.settings.Declared: judge
    model, labels, grep, budget), and the judge cache, whose default here is rejudge's own."""

    # as `agent-health rejudge --cache/--no-cache`: re-judging asks the judges again unless told
    cache: bool = Field(False, description="Reuse verdicts from the judge cache (default: ask the judges again).")


def build_rejudge_job(suite: SuiteAssets) -> JobDefinition:
    """The rejudge job of one suite, partitioned like its results (a range of partitions is one run)."""
    names = suite.names
    results_key = suite.key("results")

    @op(
        name=f"{names.flat}__rejudge",
        out={},
        required_resource_keys={suite.namespace.resource_key},
        description=f"Re-judge the stored results of `{suite.source_file}` for the run's partitions: test bodies "
        "run again against the stored agent runs (the agent is never called); earlier verdicts are kept.",
    )
    def rejudge_step(context: OpExecutionContext, config: RejudgeConfig) -> Iterator[AssetMaterialization]:
        agent_health: AgentHealthResource = suite.namespace.resource(context)
        by_agent = {
            agent: [test_id_of(suite.suite, t) for t in tests]
            for agent, tests in split_keys(context.partition_keys).items()
        }
        settings = agent_health.run_settings(config)  # this run's config wins over the resource's settings
        try:
            done = rejudge_partitions(
                agent_health.project(),
                suite.suite,
                by_agent,
                settings,
                source=f"{suite.suite}: latest results of {', '.join(by_agent)} (Dagster run {context.run_id})",
                transport="dagster",
                on_error=context.log.error,
                first=f"materialize {'/'.join(names.prefix)}/results for them first",
            )
        except AgentHealthError as exc:  # nothing stored, a bad eval file or config: one clear message
            raise Failure(f"{suite.suite}: {exc}") from exc
        for line in done.skipped:
            context.log.warning(f"skipped: {line}")
        if done.missing:
            context.log.warning(
                f"{suite.suite}: {done.missing} selected partition(s) have no stored result to re-judge"
            )
        if done.not_run_reason:  # e.g. the budget was reached
            context.log.warning(f"{suite.suite}: {done.not_run} result(s) not re-judged: {done.not_run_reason}")
        context.log.info(
            f"{suite.suite}: {len(done.results)} result(s) re-judged"
            + (f" and stored in {done.store} (run {done.run_id})" if done.store else "")
        )
        for r in done.results:  # the stored result changed: so did its results partition
            yield AssetMaterialization(
                asset_key=results_key,
                partition=str(multi_key(r.agent, test_key(r.test_id))),
                metadata=_rejudged_meta(r, done.run_id),
            )

    @job(
        name=f"rejudge__{names.flat}",
        partitions_def=suite.results_def,
        description=f"Re-judge stored results of `{suite.source_file}` for a range of (agent version x test) "
        "partitions, optionally with another judge model, without calling the agent.",
    )
    def rejudge_job() -> None:
        rejudge_step()

    return rejudge_job


def _rejudged_meta(result: TestResult, run_id: str | None) -> dict[str, Any]:
    return {**outcome_metadata(result), **({"rejudge_run": run_id} if run_id else {})}


def build_rejudge_jobs(suites: list[SuiteAssets]) -> list[JobDefinition]:
    return [build_rejudge_job(s) for s in suites]
