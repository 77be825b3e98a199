"""Sensors and the schedule.

- `eval_files_sensor` keeps each suite's test partitions in step with its eval file (adds,
  removes, re-observes changed tests) and requests runs for new and changed tests.
- `agent_versions_sensor` keeps `agent_versions` in step with the agent configuration and
  requests every suite for a new version.
- `nightly_benchmark` materializes every suite for the current agent versions.
Each request is one run per suite (a partition range), the single-run backfill shape; rollups
and the benchmark tables follow by declarative automation (eager)."""

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    AddDynamicPartitionsRequest,
    AssetObservation,
    AssetSelection,
    AutomationConditionSensorDefinition,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    DeleteDynamicPartitionsRequest,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
    sensor,
)
from dagster._core.definitions.data_version import DATA_VERSION_TAG

from agent_health.loader import LoadResult
from agent_health.pipeline import plan_suite_sync
from definitions.defs.partitions import AGENT_VERSIONS, contiguous_blocks, ordered_after, range_tags
from definitions.defs.resources import AgentHealthResource
from definitions.defs.suite_assets import SuiteAssets

DEFAULT_CRON = "0 2 * * *"


def evaluate_request(
    s: SuiteAssets, agents: Sequence[str], tests: Sequence[str], run_key: str | None, reason: str
) -> RunRequest:
    """One run materializing results, metrics and insights for agents x tests (contiguous ranges)."""
    return RunRequest(
        run_key=run_key, job_name=s.names.job, tags={**range_tags(agents, tests), "agent_health/reason": reason}
    )


def _digest(*parts: Any) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def sync_eval_files(
    instance: Any, project: Any, suites: Sequence[SuiteAssets], cursor: dict[str, dict[str, str]], log: Any = None
) -> tuple[SensorResult, list[str]]:
    """The eval-files sensor's work as a function (the headless job applies it too).

    Returns the SensorResult and the problems found (files that failed to load, suites that
    appeared after the code location loaded)."""
    loaded_all = project.load_all()
    by_suite: dict[str, LoadResult] = {}
    for t in loaded_all.tests:
        by_suite.setdefault(t.case.suite, LoadResult(root=loaded_all.root)).tests.append(t)
    files = project.suite_files(refresh=True)
    file_errors: dict[str, list[Any]] = {}
    for err in loaded_all.errors:
        file_errors.setdefault(getattr(err, "file", ""), []).append(err)
    agents = list(instance.get_dynamic_partitions(AGENT_VERSIONS))
    requests: list[Any] = []
    runs: list[RunRequest] = []
    events: list[AssetObservation] = []
    problems: list[str] = []
    new_cursor: dict[str, dict[str, str]] = {}
    for s in suites:
        current = list(instance.get_dynamic_partitions(s.names.tests_partitions))
        loaded = by_suite.get(s.suite, LoadResult(root=loaded_all.root))
        loaded.errors = file_errors.get(files.get(s.suite, s.source_file), [])
        load_error = None if s.suite in files else f"{s.source_file}: eval file is gone; its partitions are kept"
        plan = plan_suite_sync(s.suite, loaded, current, cursor.get(s.suite, {}), load_error)
        new_cursor[s.suite] = plan.hashes
        if plan.error:
            problems.append(plan.error)
            if log:
                log.warning(f"{s.suite}: {plan.error}")
        if plan.add:
            requests.append(AddDynamicPartitionsRequest(s.names.tests_partitions, plan.add))
        if plan.remove:
            requests.append(DeleteDynamicPartitionsRequest(s.names.tests_partitions, plan.remove))
        known = cursor.get(s.suite, {})
        for tid, h in plan.hashes.items():
            if known.get(tid) != h:
                events.append(
                    AssetObservation(
                        asset_key=s.key("cases"),
                        partition=tid,
                        tags={DATA_VERSION_TAG: h[:16]},
                        metadata={"content_hash": h},
                    )
                )
        dirty = plan.add + plan.changed
        if dirty and agents:
            order = ordered_after(current, plan.add, plan.remove)
            for block in contiguous_blocks(order, dirty):
                digest = _digest(agents, block, [plan.hashes[t] for t in block])
                runs.append(evaluate_request(s, agents, block, f"eval:{s.suite}:{digest}", "tests added or changed"))
    for suite in sorted(set(project.suite_files()) - {s.suite for s in suites}):
        problems.append(f"new suite {suite!r}: reload the code location to create its assets")
    return SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=requests,
        asset_events=events,
        cursor=json.dumps(new_cursor, sort_keys=True),
    ), problems


def sync_agent_versions(instance: Any, project: Any, suites: Sequence[SuiteAssets]) -> SensorResult:
    """Add configured agent versions, delete ones no longer configured, and request every suite
    (one run each) for each new version."""
    refs = project.config.agent_refs()
    current = list(instance.get_dynamic_partitions(AGENT_VERSIONS))
    add = [r for r in refs if r not in current]
    remove = [r for r in current if r not in refs]
    requests: list[Any] = []
    if add:
        requests.append(AddDynamicPartitionsRequest(AGENT_VERSIONS, add))
    if remove:
        requests.append(DeleteDynamicPartitionsRequest(AGENT_VERSIONS, remove))
    runs = []
    for agent in add:
        for s in suites:
            tests = list(instance.get_dynamic_partitions(s.names.tests_partitions))
            if tests:
                runs.append(
                    evaluate_request(
                        s, [agent], tests, f"agent:{agent}:{s.suite}:{_digest(tests)}", f"new agent version {agent}"
                    )
                )
    return SensorResult(run_requests=runs, dynamic_partitions_requests=requests)


def build_automation(
    suites: Sequence[SuiteAssets], jobs: Mapping[str, Any], interval_s: int = 30
) -> tuple[list[Any], list[Any]]:
    """(sensors, schedules). `jobs`: suite -> its evaluate job (sensors request runs of them)."""
    evaluate: dict[str, Any] = {"jobs": [jobs[s.suite] for s in suites]} if suites else {}

    @sensor(
        name="eval_files_sensor",
        minimum_interval_seconds=interval_s,
        default_status=DefaultSensorStatus.RUNNING,
        **evaluate,
        description="Keeps each suite's test partitions in step with its eval file and "
        "requests runs for added and changed tests.",
    )
    def eval_files_sensor(context: SensorEvaluationContext, agent_health: AgentHealthResource):
        result, problems = sync_eval_files(
            context.instance, agent_health.project(), suites, json.loads(context.cursor or "{}"), context.log
        )
        if not (result.run_requests or result.dynamic_partitions_requests or result.asset_events) and problems:
            context.update_cursor(result.cursor)
            return SkipReason("; ".join(problems)[:1000])
        return result

    @sensor(
        name="agent_versions_sensor",
        minimum_interval_seconds=interval_s,
        default_status=DefaultSensorStatus.RUNNING,
        **evaluate,
        description="Keeps agent_versions in step with the agent configuration; a new version gets every "
        "suite materialized.",
    )
    def agent_versions_sensor(context: SensorEvaluationContext, agent_health: AgentHealthResource):
        return sync_agent_versions(context.instance, agent_health.project(), suites)

    cron = os.environ.get("AGENT_HEALTH_SCHEDULE_CRON", DEFAULT_CRON)
    schedules = [nightly_schedule(s, jobs[s.suite], cron) for s in suites]

    automation = AutomationConditionSensorDefinition(
        "agent_health_automation",
        target=AssetSelection.all(),
        default_status=DefaultSensorStatus.RUNNING,
        description="Materializes rollups and the benchmark tables once their results are in.",
    )
    return [eval_files_sensor, agent_versions_sensor, automation], schedules


def nightly_schedule(s: SuiteAssets, job: Any, cron: str) -> Any:
    """One schedule per suite (a run covers one partitions definition): every current agent
    version x every current test of the suite, in one run."""

    @schedule(
        name=f"nightly__{s.names.flat}",
        cron_schedule=cron,
        job=job,
        execution_timezone="UTC",
        default_status=DefaultScheduleStatus.RUNNING,
        description=f"Materializes {s.source_file} for the current agent versions ({cron}, UTC; "
        "$AGENT_HEALTH_SCHEDULE_CRON).",
    )
    def nightly(context: ScheduleEvaluationContext):
        agents = list(context.instance.get_dynamic_partitions(AGENT_VERSIONS))
        tests = list(context.instance.get_dynamic_partitions(s.names.tests_partitions))
        if not agents or not tests:
            return SkipReason(f"{s.suite}: no agent versions or tests registered yet (the sensors add them)")
        stamp = context.scheduled_execution_time.isoformat() if context.scheduled_execution_time else "now"
        return evaluate_request(s, agents, tests, f"nightly:{s.suite}:{stamp}", "nightly benchmark")

    return nightly
