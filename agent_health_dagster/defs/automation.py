"""Sensors and the schedule.

- `eval_files_sensor` keeps each suite's test partitions in step with its eval file (adds,
  removes, reports changed content hashes) and requests runs for new and changed tests.
- `agent_versions_sensor` registers the agent versions of the configuration (retired versions
  keep their history; `python -m agent_health_dagster.manage delete-version` deletes one),
  reports each version's settings data version, and requests every suite for a new version.
  It removes versions added by hand that the configuration never had.
- `refresh_sensor` refreshes everything downstream of the results (every suite's metrics, insights
  and rollup, the comparison, the leaderboard) in one `refresh` run per agent version, once the
  evaluations of a change are done, however they were launched (sensor, schedule, backfill, UI).
- `nightly__<suite>` materializes a suite for the configured agent versions.
Each evaluation request is a partition range per suite (the single-run backfill shape), split into
runs of at most the suite's partitions per run as a backfill would be."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from dagster import (
    AddDynamicPartitionsRequest,
    AssetCheckEvaluation,
    AssetCheckSeverity,
    AssetKey,
    AssetObservation,
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    DeleteDynamicPartitionsRequest,
    RunRecord,
    RunRequest,
    RunsFilter,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
    sensor,
)

from agent_health.errors import AgentHealthError
from agent_health.pipeline import (
    UP_TO_DATE,
    LoadResult,
    Project,
    agent_version_data_version,
    deployment_settings,
    freshness_description,
    plan_suite_sync,
)
from agent_health_dagster.defs.names import REFRESH_JOB
from agent_health_dagster.defs.namespace import DEFAULT, Namespace
from agent_health_dagster.defs.partitions import (
    DATA_VERSION_TAG,
    PARTITION_TAG,
    contiguous_blocks,
    multi_key,
    ordered_after,
    range_tags,
    run_agent_versions,
    test_id_of,
    test_key,
)
from agent_health_dagster.defs.resources import AgentHealthResource
from agent_health_dagster.defs.suite_assets import SuiteAssets

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


def configured_order(instance: Any, project: Project, ns: Namespace = DEFAULT) -> list[str]:
    """Registered agent versions that the configuration still knows, in registration order."""
    known = set(project.config.agent_refs())
    return [a for a in instance.get_dynamic_partitions(ns.agent_versions) if a in known]


def sync_eval_files(
    instance: Any,
    project: Project,
    suites: Sequence[SuiteAssets],
    cursor: dict[str, dict[str, str]],
    log: Any = None,
    ns: Namespace = DEFAULT,
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
    sources = project.suite_sources()  # a suite's files: `one.eval.py` and `one.yaml` are one suite
    file_errors: dict[str, list[Any]] = {}
    for err in loaded_all.errors:
        file_errors.setdefault(getattr(err, "file", ""), []).append(err)
    agents = configured_order(instance, project, ns)
    requests: list[Any] = []
    runs: list[RunRequest] = []
    events: list[Any] = []
    problems: list[str] = []
    new_cursor: dict[str, dict[str, str]] = {}
    refresh = False
    for s in suites:
        registered = s.test_keys(instance)
        current = [test_id_of(s.suite, k) for k in registered]
        loaded = by_suite.get(s.suite, LoadResult(root=loaded_all.root))
        loaded.errors = [e for f in sources.get(s.suite, (s.source_file,)) for e in file_errors.get(f, [])]
        load_error = None if s.suite in sources else f"{s.source_file}: eval file is gone; its partitions are kept"
        known = dict(cursor.get(s.suite, {}))
        if current and any(t not in known for t in current):
            known = {
                **{test_id_of(s.suite, k): v for k, v in observed_versions(instance, s.key("cases")).items()},
                **known,
            }
        plan = plan_suite_sync(s.suite, loaded, current, known, load_error, hash_length=HASH_LENGTH)
        new_cursor[s.suite] = plan.hashes
        if plan.error:
            problems.append(plan.error)
            if log:
                log.warning(f"{s.suite}: {plan.error}")
        # Keys registered as whole test ids (before keys dropped the `suite::` prefix) move to the
        # short key; their stored results keep their ids, so nothing is rerun for them.
        legacy = [k for k in registered if "::" in k and test_id_of(s.suite, k) not in plan.remove]
        add = [test_key(t) for t in plan.add] + [test_key(k) for k in legacy]
        remove = [test_key(t) if test_key(t) in registered else t for t in plan.remove] + legacy
        if add:
            requests.append(AddDynamicPartitionsRequest(s.names.tests_partitions, add))
        if remove:
            requests.append(DeleteDynamicPartitionsRequest(s.names.tests_partitions, remove))
        if plan.remove and not plan.add and not plan.changed:
            refresh = True  # removed tests no longer count in the rollups: they are refreshed
        if plan.changed and agents:
            stale = {t: ["test definition changed"] for t in plan.changed}
            events += out_of_date_events(s, agents, stale)
        changed = set(plan.changed)
        if plan.add and not current and not known:
            # The first event of a cases asset: later observations are compared against it.
            changed.add(plan.add[0])
        for tid in plan.hashes:
            if tid in changed:
                events.append(observation(s.key("cases"), test_key(tid), plan.hashes[tid]))
        dirty = plan.add + plan.changed
        if dirty and agents:
            order = ordered_after(registered, add, remove)
            for block in contiguous_blocks(order, [test_key(t) for t in dirty]):
                digest = _digest(agents, block, [plan.hashes[test_id_of(s.suite, t)] for t in block])
                for agent_block in contiguous_blocks(list(instance.get_dynamic_partitions(ns.agent_versions)), agents):
                    runs.extend(
                        evaluate_requests(
                            s, agent_block, block, f"eval:{s.suite}:{digest}:{agent_block[0]}", "tests added or changed"
                        )
                    )
    for suite in sorted(set(project.suite_files()) - {s.suite for s in suites}):
        problems.append(f"new suite {suite!r}: reload the code location to create its assets")
    if refresh and agents:
        runs.extend(refresh_requests(instance, agents, f"removed:{_digest(new_cursor)}", "tests removed", ns))
    return SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=requests,
        asset_events=events,
        cursor=json.dumps(new_cursor, sort_keys=True),
    ), problems


def sync_agent_versions(
    instance: Any,
    project: Project,
    suites: Sequence[SuiteAssets],
    cursor: Mapping[str, str] | None = None,
    ns: Namespace = DEFAULT,
) -> SensorResult:
    """Register configured agent versions, report each version's settings data version when it
    changed, and request every suite for each new version. A version that was configured once and
    is no longer is retired: kept, with its history. A version the configuration never had (added
    by hand in the launch dialog: no settings were ever reported for it) is removed."""
    refs = project.config.agent_refs()
    current = list(instance.get_dynamic_partitions(ns.agent_versions))
    add = [r for r in refs if r not in current]
    requests: list[Any] = [AddDynamicPartitionsRequest(ns.agent_versions, add)] if add else []
    known = dict(cursor or {})
    unconfigured = [v for v in current if v not in refs and v not in known]
    if any(r not in known for r in refs) or unconfigured:
        known = {**observed_versions(instance, ns.settings_key), **known}
    stray = [v for v in unconfigured if v not in known]
    if stray:
        requests.append(DeleteDynamicPartitionsRequest(ns.agent_versions, stray))
    versions: dict[str, str] = {}
    events: list[Any] = []
    for ref in refs:
        try:
            versions[ref] = agent_version_data_version(project.config, ref)
        except AgentHealthError:
            continue
        if known.get(ref) != versions[ref]:
            events.append(observation(ns.settings_key, ref, versions[ref]))
    changed = [ref for ref in versions if ref in known and known[ref] != versions[ref]]
    if changed:  # the results of these versions are out of date until rerun
        for s in suites:
            events += out_of_date_events(s, changed)
    runs = []
    for agent in add:
        for s in suites:
            tests = s.test_keys(instance)
            if tests:
                runs.extend(
                    evaluate_requests(
                        s, [agent], tests, f"agent:{agent}:{s.suite}:{_digest(tests)}", f"new agent version {agent}"
                    )
                )
    if deployment_settings().evaluate_missing:
        runs.extend(missing_requests(instance, project, suites, exclude=add, ns=ns))
    return SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=requests,
        asset_events=events,
        cursor=json.dumps({**known, **versions}, sort_keys=True),
    )


def missing_requests(
    instance: Any, project: Project, suites: Sequence[SuiteAssets], exclude: Sequence[str] = (), ns: Namespace = DEFAULT
) -> list[RunRequest]:
    """Runs for every configured agent version x registered test whose results partition was never
    materialized (a version registered before its suites were evaluated for it, a run that died),
    in contiguous blocks per suite and version. A suite being evaluated is left for the next tick
    (its runs may be the ones filling it in); each block is requested once (its run key)."""
    agents = [a for a in configured_order(instance, project, ns) if a not in exclude]
    if not agents:
        return []
    running = [r.dagster_run for r in _evaluation_runs(instance, IN_PROGRESS, ns=ns)]
    busy = {s.suite for s in suites for run in running if evaluates(run, s)}
    runs: list[RunRequest] = []
    for s in suites:
        tests = s.test_keys(instance)
        if s.suite in busy or not tests:
            continue
        keys = {(a, t): str(multi_key(a, t)) for a in agents for t in tests}
        status = instance.get_status_by_partition(s.key("results"), list(keys.values()), s.results_def) or {}
        for agent in agents:
            missing = [t for t in tests if status.get(keys[(agent, t)]) is None]
            for block in contiguous_blocks(tests, missing):
                key = f"missing:{s.suite}:{agent}:{_digest(block)}"
                runs.extend(evaluate_requests(s, [agent], block, key, f"no results yet for {agent}"))
    return runs


def evaluates(run: Any, s: SuiteAssets) -> bool:
    """Whether `run` evaluates suite `s` (its evaluate or rejudge job, or an asset job selecting its results)."""
    if run.job_name in (s.names.job, f"rejudge__{s.names.flat}"):
        return True
    return s.key("results") in (run.asset_selection or ())


def out_of_date_events(
    s: SuiteAssets, agents: Sequence[str], stale: Mapping[str, Sequence[str]] | None = None
) -> list[Any]:
    """The moment a sensor sees a change, the `up_to_date` check of everything downstream of the
    changed results fails (WARN): the suite's rollup (with its metrics and insights), the
    comparisons and the leaderboard; the refresh after the rerun evaluates them again. `stale`: the
    changed tests with why (for every one of `agents`); None: the settings of `agents` changed."""
    if stale is not None:
        text = freshness_description(f"{s.suite} for {', '.join(agents)}", stale)
    else:
        text = (
            f"the settings of {', '.join(agents)} (agent or judge) changed since the results of {s.suite}; rerun them"
        )
    text += " (seen by the sensor; the refresh after the rerun clears this)"
    ns = s.namespace
    return [_stale(key, text) for key in (s.key("rollup"), ns.comparison_key, ns.leaderboard_key)]


def _stale(key: AssetKey, description: str) -> AssetCheckEvaluation:
    return AssetCheckEvaluation(
        asset_key=key,
        check_name=UP_TO_DATE,
        passed=False,
        severity=AssetCheckSeverity.WARN,
        description=description[:1000],
    )


EVALUATION_JOB_PREFIXES = ("evaluate__", "rejudge__")
EVALUATE_STEP_SUFFIX = "__evaluate"  # SuiteNames.step: the op of each suite's evaluation step
IN_PROGRESS = (
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
)
FINISHED = (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED)
REFRESH_LOOKBACK_S = 600.0  # on its first tick the refresh sensor looks this far back for finished runs


def refresh_requests(
    instance: Any, agents: Sequence[str], run_key: str, reason: str, ns: Namespace = DEFAULT
) -> list[RunRequest]:
    """One `refresh` run per agent version of `agents`, in registration order: only a run of one
    version sets each rollup check's status on that version's partition."""
    order = list(instance.get_dynamic_partitions(ns.agent_versions))
    return [
        RunRequest(
            run_key=f"refresh:{run_key}:{agent}",
            job_name=ns.refresh_job,
            partition_key=agent,
            tags={"agent_health/reason": reason},
        )
        for agent in order
        if agent in agents
    ]


def is_evaluation(run: Any, ns: Namespace = DEFAULT) -> bool:
    """A run that wrote results: an evaluate or rejudge job, or a run of the implicit asset job
    (what a backfill or the UI's Materialize of results launches) whose selection has results.
    With a prefixed namespace, only the runs of its own eval root (its jobs, keys and steps)."""
    ours = ns.name("")  # "" or "<prefix>__": every job, op and asset key of a prefixed eval root starts so
    if run.job_name.startswith(tuple(f"{p}{ours}" for p in EVALUATION_JOB_PREFIXES)):
        return True
    steps = run.step_keys_to_execute or ()
    return any(
        key.path[-1] == "results" and (not ns.prefix or key.path[0] == ns.prefix) for key in run.asset_selection or ()
    ) or any(step.startswith(ours) and step.endswith(EVALUATE_STEP_SUFFIX) for step in steps)


def _evaluation_runs(
    instance: Any, statuses: Sequence[DagsterRunStatus], updated_after: float | None = None, ns: Namespace = DEFAULT
) -> list[RunRecord]:
    filters = RunsFilter(
        statuses=list(statuses),
        updated_after=datetime.fromtimestamp(updated_after, UTC) if updated_after is not None else None,
    )
    return [r for r in instance.get_run_records(filters=filters) if is_evaluation(r.dagster_run, ns)]


def plan_refresh(
    instance: Any, cursor: Mapping[str, Any], now: float, ns: Namespace = DEFAULT
) -> tuple[list[RunRequest], dict[str, Any]]:
    """The refresh sensor's work as a function: the agent versions whose results changed (evaluate
    and rejudge runs finished since the cursor, however they were launched), refreshed once none of
    them is still being evaluated (queued or running): one `refresh` run per block of versions, so a
    change that fans out into several evaluation runs gives one downstream run. Returns the run
    requests and the new cursor (`since`: the newest finished run seen; `pending`: versions waiting)."""
    registered = list(instance.get_dynamic_partitions(ns.agent_versions))
    since = float(cursor.get("since", now - REFRESH_LOOKBACK_S))
    counted = set(cursor.get("seen", ()))
    pending = dict.fromkeys(v for v in cursor.get("pending", ()) if v in registered)
    latest = since
    fetched: list[tuple[str, float]] = []
    ended: dict[str, float] = {}  # version -> when its newest evaluation counted here ended
    for record in _evaluation_runs(instance, FINISHED, since - 1.0, ns):
        run, stamp = record.dagster_run, record.update_timestamp.timestamp()
        fetched.append((run.run_id, stamp))
        latest = max(latest, stamp)
        if run.run_id not in counted:
            for version in run_agent_versions(run.tags, registered):
                pending[version] = None
                ended[version] = max(ended.get(version, 0.0), record.end_time or stamp)
    # a version refreshed after its evaluations ended needs no other refresh (the headless job
    # refreshes each version it evaluated: `dagster dev` opened on its instance then has nothing to do)
    for version in refreshed_after(instance, ended, ns):
        pending.pop(version, None)
    busy = {
        v
        for r in _evaluation_runs(instance, IN_PROGRESS, ns=ns)
        for v in run_agent_versions(r.dagster_run.tags, registered)
    }
    # Hold every pending version while one of them is still being evaluated: the evaluation runs
    # of one change (several suites, blocks of versions) end in one refresh.
    ready = [] if busy & set(pending) else [v for v in registered if v in pending]
    waiting = [v for v in pending if v not in ready]
    key = _digest(ready, latest, sorted(counted))
    requests = refresh_requests(instance, ready, key, "results changed", ns) if ready else []
    # runs at the newest update time may be fetched again next tick: remember them as counted
    recent = sorted(rid for rid, stamp in fetched if stamp >= latest - 1.0)
    return requests, {"since": latest, "seen": recent, "pending": waiting}


def refreshed_after(instance: Any, ended: Mapping[str, float], ns: Namespace = DEFAULT) -> set[str]:
    """The versions of `ended` (version -> a time) with a refresh run started after that time, and
    succeeded or still going, or queued."""
    if not ended:
        return set()
    filters = RunsFilter(
        job_name=ns.refresh_job,
        statuses=[DagsterRunStatus.SUCCESS, *IN_PROGRESS],
        updated_after=datetime.fromtimestamp(min(ended.values()) - 1.0, UTC),
    )
    found = set()
    for record in instance.get_run_records(filters=filters):
        version = record.dagster_run.tags.get(PARTITION_TAG)
        if version in ended and (record.start_time is None or record.start_time > ended[version]):
            found.add(version)
    return found


def sensor_interval() -> int:
    """Seconds between sensor evaluations ($AGENT_HEALTH_SENSOR_INTERVAL_S, default 30)."""
    return deployment_settings().sensor_interval_s


def build_automation(
    suites: Sequence[SuiteAssets], jobs: Mapping[str, Any], ns: Namespace = DEFAULT
) -> tuple[list[Any], list[Any]]:
    """(sensors, schedules). `jobs`: suite -> its evaluate job, and the `refresh` job (under the key
    `refresh`, whatever its name in `ns`)."""
    evaluate = [jobs[s.suite] for s in suites]
    interval = sensor_interval()

    @sensor(
        name=ns.name("eval_files_sensor"),
        minimum_interval_seconds=interval,
        default_status=DefaultSensorStatus.RUNNING,
        jobs=[*evaluate, jobs[REFRESH_JOB]],
        required_resource_keys={ns.resource_key},
        description="Keeps each suite's test partitions in step with its eval file, requests runs for added "
        "and changed tests, and a refresh when tests were removed.",
    )
    def eval_files_sensor(context: SensorEvaluationContext, **_called: Any) -> SensorResult | SkipReason:
        agent_health: AgentHealthResource = ns.resource(context)
        result, problems = sync_eval_files(
            context.instance, agent_health.project(), suites, json.loads(context.cursor or "{}"), context.log, ns
        )
        if not (result.run_requests or result.dynamic_partitions_requests or result.asset_events) and problems:
            context.update_cursor(result.cursor)
            return SkipReason("; ".join(problems)[:1000])
        return result

    agent_jobs: dict[str, Any] = {"jobs": evaluate} if evaluate else {}

    @sensor(
        name=ns.name("agent_versions_sensor"),
        minimum_interval_seconds=interval,
        default_status=DefaultSensorStatus.RUNNING,
        **agent_jobs,
        required_resource_keys={ns.resource_key},
        description="Registers the agent versions of the configuration and their settings data versions (a "
        "new version gets every suite evaluated); keeps retired versions; removes versions added by hand that "
        "the configuration never had.",
    )
    def agent_versions_sensor(context: SensorEvaluationContext, **_called: Any) -> SensorResult:
        agent_health: AgentHealthResource = ns.resource(context)
        cursor = json.loads(context.cursor or "{}")
        return sync_agent_versions(context.instance, agent_health.project(), suites, cursor, ns)

    @sensor(
        name=ns.name("refresh_sensor"),
        minimum_interval_seconds=interval,
        default_status=DefaultSensorStatus.RUNNING,
        job=jobs[REFRESH_JOB],
        description="Once the evaluations of an agent version are done (however they were launched), refreshes "
        "everything downstream of its results in one run: every suite's metrics, insights and rollup, the "
        "comparison and the leaderboard.",
    )
    def refresh_sensor(context: SensorEvaluationContext) -> list[RunRequest] | SkipReason:
        requests, cursor = plan_refresh(context.instance, json.loads(context.cursor or "{}"), time.time(), ns)
        context.update_cursor(json.dumps(cursor, sort_keys=True))
        if not requests:
            waiting = cursor["pending"]
            return SkipReason(f"waiting for the evaluations of {', '.join(waiting)}" if waiting else "no new results")
        return requests

    cron = deployment_settings().schedule_cron
    schedules = [nightly_schedule(s, jobs[s.suite], cron, ns) for s in suites]
    return [eval_files_sensor, agent_versions_sensor, refresh_sensor], schedules


def nightly_schedule(s: SuiteAssets, job: Any, cron: str, ns: Namespace = DEFAULT) -> Any:
    """One schedule per suite (a run covers one partitions definition): the configured agent
    versions x every current test of the suite, one run per contiguous block of versions; the
    refresh sensor follows once they are done."""

    @schedule(
        name=f"nightly__{s.names.flat}",
        cron_schedule=cron,
        job=job,
        execution_timezone="UTC",
        default_status=DefaultScheduleStatus.RUNNING,
        required_resource_keys={ns.resource_key},
        description=f"Materializes {s.source_file} for the configured agent versions ({cron}, UTC; "
        "$AGENT_HEALTH_SCHEDULE_CRON).",
    )
    def nightly(context: ScheduleEvaluationContext, **_called: Any) -> list[RunRequest] | SkipReason:
        agent_health: AgentHealthResource = ns.resource(context)
        registered = list(context.instance.get_dynamic_partitions(ns.agent_versions))
        agents = configured_order(context.instance, agent_health.project(), ns)
        tests = s.test_keys(context.instance)
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
