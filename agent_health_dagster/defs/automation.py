"""Sensors and the schedule.

- `eval_files_sensor` keeps each suite's test partitions in step with its eval file (adds,
  removes, reports changed content hashes) and requests runs for new and changed tests.
- `agent_versions_sensor` registers the agent versions of the configuration (it never deletes
  one: retired versions keep their history; `python -m agent_health_dagster.manage delete-version` does),
  reports each version's settings data version, and requests every suite for a new version.
- `nightly__<suite>` materializes a suite for the configured agent versions.
Each request is a partition range per suite (the single-run backfill shape), split into runs of at
most the suite's partitions per run as a backfill would be; rollups and the benchmark tables follow
by declarative automation."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    AddDynamicPartitionsRequest,
    AssetKey,
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

from agent_health.errors import AgentHealthError
from agent_health.loader import LoadResult
from agent_health.pipeline import Project, agent_version_data_version, plan_suite_sync
from agent_health_dagster.defs.partitions import (
    AGENT_SETTINGS_KEY,
    AGENT_VERSIONS,
    DATA_VERSION_TAG,
    contiguous_blocks,
    ordered_after,
    range_tags,
)
from agent_health_dagster.defs.resources import AgentHealthResource
from agent_health_dagster.defs.suite_assets import SuiteAssets

DEFAULT_CRON = "0 2 * * *"
INTERVAL_ENV = "AGENT_HEALTH_SENSOR_INTERVAL_S"
HASH_LENGTH = 16


def evaluate_requests(
    s: SuiteAssets, agents: Sequence[str], tests: Sequence[str], run_key: str, reason: str
) -> list[RunRequest]:
    """Runs materializing results, metrics and insights for agents x tests (contiguous ranges):
    one run, or runs of at most the suite's partitions per run (run keys numbered from the second)."""
    ranges = s.run_ranges(list(agents), list(tests))
    return [
        RunRequest(
            run_key=run_key if i == 0 else f"{run_key}:{i}",
            job_name=s.names.job,
            tags={**range_tags(block, chunk), "agent_health/reason": reason},
        )
        for i, (block, chunk) in enumerate(ranges)
    ]


def _digest(*parts: Any) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def observed_versions(instance: Any, key: AssetKey, page: int = 10_000) -> dict[str, str]:
    """Latest reported data version per partition of an external asset (pages of 10,000, newest
    first; only changed tests are ever observed, so there are few)."""
    out: dict[str, str] = {}
    cursor = None
    while True:
        result = instance.fetch_observations(key, limit=page, cursor=cursor)
        for record in result.records:
            obs = record.asset_observation
            if obs is not None and record.partition_key and record.partition_key not in out:
                version = obs.tags.get(DATA_VERSION_TAG)
                if version:
                    out[record.partition_key] = version
        if not result.has_more:
            return out
        cursor = result.cursor


def observation(key: AssetKey, partition: str, version: str, **metadata: Any) -> AssetObservation:
    return AssetObservation(asset_key=key, partition=partition, tags={DATA_VERSION_TAG: version}, metadata=metadata)


def configured_order(instance: Any, project: Project) -> list[str]:
    """Registered agent versions that the configuration still knows, in registration order."""
    known = set(project.config.agent_refs())
    return [a for a in instance.get_dynamic_partitions(AGENT_VERSIONS) if a in known]


def sync_eval_files(
    instance: Any, project: Project, suites: Sequence[SuiteAssets], cursor: dict[str, dict[str, str]], log: Any = None
) -> tuple[SensorResult, list[str]]:
    """The eval-files sensor's work as a function (the headless job applies it too).

    A new test is registered without an event (its results are simply missing); a changed test
    gets one observation carrying its new content hash, which marks its results stale. "Changed"
    is against the cursor, else against the hash last reported to the instance. Returns the
    SensorResult and the problems found (files that failed to load, new suites)."""
    loaded_all = project.load_all()
    by_suite: dict[str, LoadResult] = {}
    for t in loaded_all.tests:
        by_suite.setdefault(t.case.suite, LoadResult(root=loaded_all.root)).tests.append(t)
    files = project.suite_files()
    file_errors: dict[str, list[Any]] = {}
    for err in loaded_all.errors:
        file_errors.setdefault(getattr(err, "file", ""), []).append(err)
    agents = configured_order(instance, project)
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
        known = dict(cursor.get(s.suite, {}))
        if current and any(t not in known for t in current):
            known = {**observed_versions(instance, s.key("cases")), **known}
        plan = plan_suite_sync(s.suite, loaded, current, known, load_error, hash_length=HASH_LENGTH)
        new_cursor[s.suite] = plan.hashes
        if plan.error:
            problems.append(plan.error)
            if log:
                log.warning(f"{s.suite}: {plan.error}")
        if plan.add:
            requests.append(AddDynamicPartitionsRequest(s.names.tests_partitions, plan.add))
        if plan.remove:
            requests.append(DeleteDynamicPartitionsRequest(s.names.tests_partitions, plan.remove))
        changed = set(plan.changed)
        if plan.add and not current and not known:
            # The first event of a cases asset: later observations are compared against it.
            changed.add(plan.add[0])
        for tid in plan.hashes:
            if tid in changed:
                events.append(observation(s.key("cases"), tid, plan.hashes[tid]))
        dirty = plan.add + plan.changed
        if dirty and agents:
            order = ordered_after(current, plan.add, plan.remove)
            for block in contiguous_blocks(order, dirty):
                digest = _digest(agents, block, [plan.hashes[t] for t in block])
                for agent_block in contiguous_blocks(list(instance.get_dynamic_partitions(AGENT_VERSIONS)), agents):
                    runs.extend(
                        evaluate_requests(
                            s, agent_block, block, f"eval:{s.suite}:{digest}:{agent_block[0]}", "tests added or changed"
                        )
                    )
    for suite in sorted(set(project.suite_files()) - {s.suite for s in suites}):
        problems.append(f"new suite {suite!r}: reload the code location to create its assets")
    return SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=requests,
        asset_events=events,
        cursor=json.dumps(new_cursor, sort_keys=True),
    ), problems


def sync_agent_versions(
    instance: Any, project: Project, suites: Sequence[SuiteAssets], cursor: Mapping[str, str] | None = None
) -> SensorResult:
    """Register configured agent versions (never delete one), report each version's settings data
    version when it changed, and request every suite (one run each) for each new version."""
    refs = project.config.agent_refs()
    current = list(instance.get_dynamic_partitions(AGENT_VERSIONS))
    add = [r for r in refs if r not in current]
    requests: list[Any] = [AddDynamicPartitionsRequest(AGENT_VERSIONS, add)] if add else []
    known = dict(cursor or {})
    if any(r not in known for r in refs):
        known = {**observed_versions(instance, AGENT_SETTINGS_KEY), **known}
    versions: dict[str, str] = {}
    events = []
    for ref in refs:
        try:
            versions[ref] = agent_version_data_version(project.config, ref)
        except AgentHealthError:
            continue
        if known.get(ref) != versions[ref]:
            events.append(observation(AGENT_SETTINGS_KEY, ref, versions[ref]))
    runs = []
    for agent in add:
        for s in suites:
            tests = list(instance.get_dynamic_partitions(s.names.tests_partitions))
            if tests:
                runs.extend(
                    evaluate_requests(
                        s, [agent], tests, f"agent:{agent}:{s.suite}:{_digest(tests)}", f"new agent version {agent}"
                    )
                )
    return SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=requests,
        asset_events=events,
        cursor=json.dumps({**known, **versions}, sort_keys=True),
    )


def sensor_interval() -> int:
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return 30
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"${INTERVAL_ENV} must be a whole number of seconds >= 1, got {raw!r}")
    return int(raw)


def build_automation(suites: Sequence[SuiteAssets], jobs: Mapping[str, Any]) -> tuple[list[Any], list[Any]]:
    """(sensors, schedules). `jobs`: suite -> its evaluate job (sensors request runs of them)."""
    evaluate: dict[str, Any] = {"jobs": [jobs[s.suite] for s in suites]} if suites else {}
    interval = sensor_interval()

    @sensor(
        name="eval_files_sensor",
        minimum_interval_seconds=interval,
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
        minimum_interval_seconds=interval,
        default_status=DefaultSensorStatus.RUNNING,
        **evaluate,
        description="Registers the agent versions of the configuration (never deletes one) and their "
        "settings data versions; a new version gets every suite materialized.",
    )
    def agent_versions_sensor(context: SensorEvaluationContext, agent_health: AgentHealthResource):
        return sync_agent_versions(context.instance, agent_health.project(), suites, json.loads(context.cursor or "{}"))

    cron = os.environ.get("AGENT_HEALTH_SCHEDULE_CRON", DEFAULT_CRON)
    schedules = [nightly_schedule(s, jobs[s.suite], cron) for s in suites]

    automation = AutomationConditionSensorDefinition(
        "agent_health_automation",
        target=AssetSelection.all(),
        default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=interval,
        description="Materializes rollups and the benchmark tables once their results are in.",
    )
    return [eval_files_sensor, agent_versions_sensor, automation], schedules


def nightly_schedule(s: SuiteAssets, job: Any, cron: str) -> Any:
    """One schedule per suite (a run covers one partitions definition): the configured agent
    versions x every current test of the suite, one run per contiguous block of versions."""

    @schedule(
        name=f"nightly__{s.names.flat}",
        cron_schedule=cron,
        job=job,
        execution_timezone="UTC",
        default_status=DefaultScheduleStatus.RUNNING,
        description=f"Materializes {s.source_file} for the configured agent versions ({cron}, UTC; "
        "$AGENT_HEALTH_SCHEDULE_CRON).",
    )
    def nightly(context: ScheduleEvaluationContext, agent_health: AgentHealthResource):
        registered = list(context.instance.get_dynamic_partitions(AGENT_VERSIONS))
        agents = configured_order(context.instance, agent_health.project())
        tests = list(context.instance.get_dynamic_partitions(s.names.tests_partitions))
        if not agents or not tests:
            return SkipReason(f"{s.suite}: no agent versions or tests registered yet (the sensors add them)")
        stamp = context.scheduled_execution_time.isoformat() if context.scheduled_execution_time else "now"
        return [
            request
            for block in contiguous_blocks(registered, agents)
            for request in evaluate_requests(
                s, block, tests, f"nightly:{s.suite}:{stamp}:{block[0]}", "nightly benchmark"
            )
        ]

    return nightly
