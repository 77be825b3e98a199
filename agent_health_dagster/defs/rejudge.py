"""Per suite a `rejudge__<suite>` job: re-judge the stored results of the selected (agent version x
test) partitions through the library's `rejudge` (stored agent runs replayed: the evaluate step
stays the only one that calls the agent), optionally with another judge model. Each re-judged
partition gets a new materialization of its results carrying the new outcome (the stored result
changed); the refresh sensor then refreshes the rollups, the comparison and the leaderboard."""

from typing import Any

from dagster import (
    AssetMaterialization,
    Config,
    Failure,
    JobDefinition,
    OpExecutionContext,
    job,
    op,
)
from pydantic import Field

from agent_health.errors import AgentHealthError
from agent_health.model import TestResult
from agent_health.reporters.base import CallbackReporter
from agent_health.session.rejudge import rejudge
from agent_health.stores import ResultKey
from agent_health_dagster.defs.partitions import multi_key, split_keys, test_id_of, test_key
from agent_health_dagster.defs.resources import AgentHealthResource, BudgetConfig
from agent_health_dagster.defs.suite_assets import SuiteAssets, outcome_metadata


class RejudgeConfig(Config):
    """How to re-judge (the Launchpad's config of a `rejudge__*` run); partitions pick what."""

    judge_model: str | None = Field(None, description="Judge model of the new verdicts (`provider:model`).")
    cache: bool = Field(False, description="Reuse verdicts from the judge cache (default: ask the judges again).")
    labels: list[str] = Field(default_factory=list, description="Only tests carrying every one of these labels.")
    grep: str | None = Field(None, description="Only tests whose name or id matches this regular expression.")
    budget: BudgetConfig | None = Field(
        None, description="Spend budget of the re-judging: only new judge spend counts (docs/budgets.md)."
    )


def build_rejudge_job(suite: SuiteAssets) -> JobDefinition:
    """The rejudge job of one suite, partitioned like its results (a range of partitions is one run)."""
    names = suite.names
    results_key = suite.key("results")

    @op(
        name=f"{names.flat}__rejudge",
        out={},
        description=f"Re-judge the stored results of `{suite.source_file}` for the run's partitions: test bodies "
        "run again against the stored agent runs (the agent is never called); earlier verdicts are kept.",
    )
    def rejudge_step(context: OpExecutionContext, config: RejudgeConfig, agent_health: AgentHealthResource):
        project = agent_health.project()
        by_agent = split_keys(context.partition_keys)
        keys = [
            ResultKey(agent, suite.suite, test_id_of(suite.suite, t))
            for agent, tests in by_agent.items()
            for t in tests
        ]
        stored = list(project.store.get_many(keys))
        missing = len(keys) - len(stored)
        if not stored:
            raise Failure(
                f"{suite.suite}: no stored result for any of the {len(keys)} selected partition(s); "
                f"materialize {'/'.join(names.prefix)}/results for them first"
            )
        settings = agent_health.run_settings(  # this run's config wins over the resource's settings
            more={
                "judge_model": config.judge_model,
                "cache": config.cache,
                "labels": tuple(config.labels),
                "grep": config.grep,
                "budget": config.budget,
            }
        )
        out: list[TestResult] = []
        try:
            loaded = project.load_suite(suite.suite)
            agents = ", ".join(by_agent)
            outcome = rejudge(
                stored,
                project.config,
                settings,
                source=f"{suite.suite}: latest results of {agents} (Dagster run {context.run_id})",
                tests=loaded.tests,
                store=project.store,
                reporters=[CallbackReporter(out.append)],
                transport="dagster",
                on_error=context.log.error,
            )
        except AgentHealthError as exc:  # a bad eval file or config: one clear message, not a traceback
            raise Failure(f"{suite.suite}: {exc}") from exc
        for line in outcome.skipped:
            context.log.warning(f"skipped: {line}")
        if missing:
            context.log.warning(f"{suite.suite}: {missing} selected partition(s) have no stored result to re-judge")
        manifest = outcome.run.run if outcome.run is not None else None
        if manifest is not None and manifest.not_run_reason:  # e.g. the budget was reached
            left = sum(manifest.not_run.values())
            context.log.warning(f"{suite.suite}: {left} result(s) not re-judged: {manifest.not_run_reason}")
        run = outcome.run
        if run is not None and run.output_errors:  # the store said no: these partitions did not change
            raise Failure(f"{suite.suite}: the re-judged results could not be stored: " + "; ".join(run.output_errors))
        context.log.info(
            f"{suite.suite}: {len(out)} result(s) re-judged"
            + (f" and stored in {run.store} (run {run.run.id})" if run and run.store else "")
        )
        for r in out:  # the stored result changed: so did its results partition
            yield AssetMaterialization(
                asset_key=results_key,
                partition=str(multi_key(r.agent, test_key(r.test_id))),
                metadata=_rejudged_meta(r, run.run.id if run else None),
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
