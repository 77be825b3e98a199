"""Sensors and schedules evaluated against a temporary instance: added, changed and removed
tests; a broken eval file; added and removed agent versions; the nightly schedule."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from dagster import (
    AddDynamicPartitionsRequest,
    AssetKey,
    DeleteDynamicPartitionsRequest,
    SensorResult,
    SkipReason,
    build_schedule_context,
    build_sensor_context,
)

from agent_health_dagster.defs.partitions import DATA_VERSION_TAG
from agent_health_dagster.defs.partitions import RANGE_END_TAG as ASSET_PARTITION_RANGE_END_TAG
from agent_health_dagster.defs.partitions import RANGE_START_TAG as ASSET_PARTITION_RANGE_START_TAG
from agent_health_dagster.headless import apply_sensor_result

pytestmark = pytest.mark.filterwarnings("ignore")


def run_sensor(pipeline, instance, name, cursor=None):
    sensor = pipeline.defs.get_repository_def().get_sensor_def(name)
    # entered with `with`: an open context keeps its instance's state current, and a later test's
    # definitions load then fails on that dead instance
    with build_sensor_context(
        instance=instance, cursor=cursor, resources={"agent_health": pipeline.resource}
    ) as context:
        result = sensor(context)
    if isinstance(result, SensorResult):
        apply_sensor_result(instance, result)
    return result, context


def adds(result, name):
    return [
        k
        for r in result.dynamic_partitions_requests
        if isinstance(r, AddDynamicPartitionsRequest) and r.partitions_def_name == name
        for k in r.partition_keys
    ]


def deletes(result, name):
    return [
        k
        for r in result.dynamic_partitions_requests
        if isinstance(r, DeleteDynamicPartitionsRequest) and r.partitions_def_name == name
        for k in r.partition_keys
    ]


def ranges(result):
    return {
        (r.job_name, r.tags[ASSET_PARTITION_RANGE_START_TAG], r.tags[ASSET_PARTITION_RANGE_END_TAG])
        for r in result.run_requests
    }


def case_versions(instance, key):
    out = {}
    for rec in reversed(instance.fetch_observations(key, limit=100).records):
        out[rec.partition_key] = rec.asset_observation.tags.get(DATA_VERSION_TAG)
    return out


def test_sensors_track_eval_files_and_agent_versions(make_pipeline, instance, project_dir, monkeypatch):
    # what the eval-files and agent-versions changes request by themselves (the requests for results
    # missing otherwise: test_a_configured_version_without_results_is_requested_once)
    monkeypatch.setenv("AGENT_HEALTH_EVALUATE_MISSING", "false")
    pipeline = make_pipeline()
    agents, _ = run_sensor(pipeline, instance, "agent_versions_sensor")
    assert adds(agents, "agent_versions") == ["demo@v1", "demo@v2"] and not agents.run_requests  # no tests yet

    first, ctx = run_sensor(pipeline, instance, "eval_files_sensor")
    assert adds(first, "tests__rca__payments") == [
        "payment-rca-finds-the-database",
        "checkout-latency",
    ]
    assert (
        "evaluate__rca__payments",
        "demo@v1|payment-rca-finds-the-database",
        "demo@v2|checkout-latency",
    ) in ranges(first)  # new tests run without a click
    assert len(first.run_requests) == 3  # one run per suite
    # new tests need no event (their results are missing); only each cases asset's first test is
    # reported, so that later changes compare against something
    assert len(first.asset_events) == 3
    hashes = json.loads(first.cursor)["rca/payments"]
    versions = dict(hashes)

    # change one test, add one, remove one
    rca = project_dir / "evals" / "rca" / "payments.eval.py"
    rca.write_text(
        rca.read_text().replace(
            'expect(result).to_have_called_tool("query_metrics")', 'expect(result).to_have_called_tool("get_metrics")'
        )
    )
    smoke = project_dir / "evals" / "smoke-checks.eval.py"
    text = smoke.read_text()
    smoke.write_text(
        text[: text.index('@test("always fails"')] + '@test("new check")\ndef new_check():\n    expect(2).to_equal(2)\n'
    )
    second, _ = run_sensor(pipeline, instance, "eval_files_sensor", first.cursor)
    assert ranges(second) == {
        ("evaluate__rca__payments", "demo@v1|checkout-latency", "demo@v2|checkout-latency"),
        ("evaluate__smoke_checks", "demo@v1|new-check", "demo@v2|new-check"),
    }
    assert adds(second, "tests__smoke_checks") == ["new-check"]
    assert deletes(second, "tests__smoke_checks") == ["always-fails"]
    assert list(instance.get_dynamic_partitions("tests__smoke_checks")) == [
        "pure-data-check",
        "new-check",
    ]
    # exactly the changed test is reported, with its new hash
    rca_events = [e for e in second.asset_events if e.asset_key == AssetKey(["rca", "payments", "cases"])]
    assert [e.partition for e in rca_events] == ["checkout-latency"]
    changed = case_versions(instance, AssetKey(["rca", "payments", "cases"]))
    assert changed["checkout-latency"] != versions["rca/payments::checkout-latency"]
    assert changed["checkout-latency"] == json.loads(second.cursor)["rca/payments"]["rca/payments::checkout-latency"]
    # a lost cursor (a new sensor, the headless job) compares with what the instance was told
    again, _ = run_sensor(pipeline, instance, "eval_files_sensor", None)
    assert not [e for e in again.asset_events if e.asset_key == AssetKey(["rca", "payments", "cases"])]

    # a file that fails to load is reported and keeps its partitions
    rca.write_text("def broken(:\n")
    third, ctx = run_sensor(pipeline, instance, "eval_files_sensor", second.cursor)
    assert isinstance(third, SkipReason) and "rca/payments.eval.py" in third.skip_message
    assert len(instance.get_dynamic_partitions("tests__rca__payments")) == 2
    # ... and the cursor still remembers its hashes, so fixing the file is not a 'change'
    assert json.loads(ctx.cursor)["rca/payments"] == json.loads(second.cursor)["rca/payments"]

    # agent versions follow the configuration: a new version gets every suite; a removed one is
    # retired, never deleted (its history stays; deleting is an explicit command)
    (project_dir / "agent_health_config.py").write_text(
        "from agent_health import AgentSpec, define_config\n"
        "config = define_config(agents=[AgentSpec(key='bot', connector='demo', versions={'a': {}})])\n"
    )
    grown, _ = run_sensor(make_pipeline(), instance, "agent_versions_sensor")
    assert adds(grown, "agent_versions") == ["bot@a"]
    assert ("evaluate__smoke_checks", "bot@a|pure-data-check", "bot@a|new-check") in ranges(grown) and len(
        grown.run_requests
    ) == 3
    (project_dir / "agent_health_config.py").write_text(
        "from agent_health import define_config\nconfig = define_config()\n"
    )
    shrunk, _ = run_sensor(make_pipeline(), instance, "agent_versions_sensor")
    assert deletes(shrunk, "agent_versions") == [] and not shrunk.run_requests
    assert "bot@a" in instance.get_dynamic_partitions("agent_versions")


def test_nightly_schedule_requests_every_suite_for_current_versions(make_pipeline, instance):
    pipeline = make_pipeline()
    repo = pipeline.defs.get_repository_def()
    schedule = repo.get_schedule_def("nightly__rca__payments")
    assert schedule.cron_schedule == "0 2 * * *"
    when = dt.datetime(2026, 1, 2, 2, 0, tzinfo=dt.UTC)
    with build_schedule_context(
        instance=instance, scheduled_execution_time=when, resources={"agent_health": pipeline.resource}
    ) as context:
        empty = schedule(context)
    assert isinstance(empty, SkipReason)
    run_sensor(pipeline, instance, "agent_versions_sensor")
    run_sensor(pipeline, instance, "eval_files_sensor")
    with build_schedule_context(
        instance=instance, scheduled_execution_time=when, resources={"agent_health": pipeline.resource}
    ) as context:
        [request] = schedule(context)
    assert request.job_name == "evaluate__rca__payments"
    assert request.tags[ASSET_PARTITION_RANGE_START_TAG] == "demo@v1|payment-rca-finds-the-database"
    assert request.tags[ASSET_PARTITION_RANGE_END_TAG] == "demo@v2|checkout-latency"
    # the requested range is exactly every (agent x test) partition, run as one run
    result = pipeline.defs.resolve_job_def(request.job_name).execute_in_process(
        instance=instance, tags=request.tags, run_config={"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
    )
    assert result.success
    assert len(pipeline.project.store.list(suite="rca/payments")) == 4


def test_schedule_cron_is_configurable(make_pipeline, monkeypatch):
    monkeypatch.setenv("AGENT_HEALTH_SCHEDULE_CRON", "*/30 * * * *")
    repo = make_pipeline().defs.get_repository_def()
    assert repo.get_schedule_def("nightly__cases").cron_schedule == "*/30 * * * *"


def test_test_partitions_registered_with_their_suite_prefix_move_to_short_keys(make_pipeline, instance):
    """Instances registered before keys dropped the redundant `suite::` prefix move to the short
    keys without rerunning anything (the stored results keep their test ids)."""
    pipeline = make_pipeline()
    run_sensor(pipeline, instance, "agent_versions_sensor")
    legacy = ["rca/payments::payment-rca-finds-the-database", "rca/payments::checkout-latency"]
    instance.add_dynamic_partitions("tests__rca__payments", legacy)
    moved, _ = run_sensor(pipeline, instance, "eval_files_sensor")
    assert sorted(deletes(moved, "tests__rca__payments")) == sorted(legacy)
    assert list(instance.get_dynamic_partitions("tests__rca__payments")) == [
        "payment-rca-finds-the-database",
        "checkout-latency",
    ]
    assert not [r for r in moved.run_requests if r.job_name == "evaluate__rca__payments"]  # nothing rerun


def test_a_version_added_by_hand_is_removed_and_a_retired_one_kept(make_pipeline, instance, project_dir):
    pipeline = make_pipeline()
    run_sensor(pipeline, instance, "agent_versions_sensor")
    instance.add_dynamic_partitions("agent_versions", ["demo@v9"])  # the launch dialog's "Add partition"
    cleaned, _ = run_sensor(pipeline, instance, "agent_versions_sensor")  # a fresh cursor: the worst case
    assert deletes(cleaned, "agent_versions") == ["demo@v9"]
    assert list(instance.get_dynamic_partitions("agent_versions")) == ["demo@v1", "demo@v2"]
    # a version that the configuration had once is retired, never removed
    (project_dir / "agent_health_config.py").write_text(
        "from agent_health import AgentSpec, define_config\n"
        "config = define_config(agents=[AgentSpec(key='demo', connector='demo', versions={'v2': {}})])\n"
    )
    retired, _ = run_sensor(make_pipeline(), instance, "agent_versions_sensor")
    assert deletes(retired, "agent_versions") == []
    assert "demo@v1" in instance.get_dynamic_partitions("agent_versions")


def test_refresh_waits_for_every_evaluation_of_a_version_then_runs_once(make_pipeline, instance):
    """Evaluation runs of several suites for the same versions (one eval-file edit fans out into
    several) give one refresh run, requested once none of them is still queued or running."""
    import time

    from dagster import DagsterRunStatus

    from agent_health_dagster.defs.automation import plan_refresh
    from agent_health_dagster.defs.partitions import range_tags

    pipeline = make_pipeline()
    run_sensor(pipeline, instance, "agent_versions_sensor")
    run_sensor(pipeline, instance, "eval_files_sensor")
    quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}

    def evaluate(suite):
        s = next(x for x in pipeline.suites if x.suite == suite)
        tags = range_tags(["demo@v1", "demo@v2"], s.test_keys(instance))
        return pipeline.defs.resolve_job_def(s.names.job).execute_in_process(
            instance=instance, tags=tags, run_config=quiet
        )

    cursor: dict = {"since": time.time() - 1}
    evaluate("rca/payments")
    # another evaluation of one of the same versions is still queued: nothing yet
    cases = next(x for x in pipeline.suites if x.suite == "cases")
    queued = instance.create_run_for_job(
        pipeline.defs.resolve_job_def(cases.names.job), tags=range_tags(["demo@v2"], cases.test_keys(instance))
    )
    requests, cursor = plan_refresh(instance, cursor, time.time())
    assert requests == [] and cursor["pending"] == ["demo@v1", "demo@v2"]
    instance.delete_run(queued.run_id)  # it will not run after all
    evaluate("cases")
    evaluate("smoke-checks")
    requests, cursor = plan_refresh(instance, cursor, time.time())
    # one run per version (only a run of one version sets a check's status on that version's
    # partition), each covering every suite that changed
    assert [(r.job_name, r.partition_key) for r in requests] == [("refresh", "demo@v1"), ("refresh", "demo@v2")]
    assert cursor["pending"] == []
    # nothing new: nothing requested, and the runs already counted are not counted again
    again, cursor = plan_refresh(instance, cursor, time.time())
    assert again == []
    run = pipeline.defs.resolve_job_def("refresh").execute_in_process(
        instance=instance, partition_key=requests[1].partition_key, run_config=quiet
    )
    assert run.success
    assert plan_refresh(instance, cursor, time.time())[0] == []  # a refresh run does not trigger one
    assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.SUCCESS


def test_a_version_refreshed_after_its_evaluations_is_not_refreshed_again(make_pipeline, instance):
    """The headless job refreshes each version after evaluating it: the refresh sensor of a
    `dagster dev` opened on that instance then requests nothing for it, and still refreshes a
    version evaluated since."""
    import time

    from agent_health_dagster.defs.automation import plan_refresh
    from agent_health_dagster.defs.partitions import range_tags

    pipeline = make_pipeline()
    run_sensor(pipeline, instance, "agent_versions_sensor")
    run_sensor(pipeline, instance, "eval_files_sensor")
    quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
    s = next(x for x in pipeline.suites if x.suite == "cases")
    evaluate = pipeline.defs.resolve_job_def(s.names.job)
    refresh = pipeline.defs.resolve_job_def("refresh")
    cursor: dict = {}  # the sensor's first tick: it looks back for finished evaluations
    assert evaluate.execute_in_process(
        instance=instance, tags=range_tags(["demo@v1", "demo@v2"], s.test_keys(instance)), run_config=quiet
    ).success
    for version in ("demo@v1", "demo@v2"):  # what the headless job does after its evaluations
        assert refresh.execute_in_process(instance=instance, partition_key=version, run_config=quiet).success
    requests, cursor = plan_refresh(instance, cursor, time.time())
    assert requests == [] and cursor["pending"] == []
    # demo@v2 evaluated again after its refresh: refreshed again, demo@v1 not
    assert evaluate.execute_in_process(
        instance=instance, tags=range_tags(["demo@v2"], s.test_keys(instance)), run_config=quiet
    ).success
    requests, cursor = plan_refresh(instance, cursor, time.time())
    assert [(r.job_name, r.partition_key) for r in requests] == [("refresh", "demo@v2")]


def test_a_backfill_of_results_counts_as_an_evaluation_for_the_refresh(make_pipeline, instance):
    """A backfill or the UI's Materialize of results runs the implicit asset job, not evaluate__*:
    the refresh follows it all the same."""
    import time

    from agent_health_dagster.defs.automation import plan_refresh
    from agent_health_dagster.defs.partitions import range_tags

    pipeline = make_pipeline()
    run_sensor(pipeline, instance, "agent_versions_sensor")
    run_sensor(pipeline, instance, "eval_files_sensor")
    s = next(x for x in pipeline.suites if x.suite == "cases")
    job = pipeline.defs.get_implicit_global_asset_job_def().get_subset(asset_selection={s.key("results")})
    cursor: dict = {"since": time.time() - 1}
    run = job.execute_in_process(
        instance=instance,
        tags=range_tags(["demo@v1", "demo@v2"], s.test_keys(instance)),
        run_config={"loggers": {"console": {"config": {"log_level": "ERROR"}}}},
    )
    assert run.success and instance.get_run_by_id(run.run_id).job_name == "__ASSET_JOB"
    requests, _ = plan_refresh(instance, cursor, time.time())
    assert [(r.job_name, r.partition_key) for r in requests] == [("refresh", "demo@v1"), ("refresh", "demo@v2")]


def test_a_configured_version_without_results_is_requested_once(make_pipeline, instance, monkeypatch):
    """Versions registered before any of their results (the headless job registers every configured
    version; a run may die): the agent-versions sensor requests each configured version x registered
    test that was never materialized, per suite and version, under a run key that stays the same
    while nothing changes (so the daemon launches it once), and waits while the suite is evaluated."""
    from dagster import DagsterRunStatus

    from agent_health_dagster.defs.partitions import range_tags

    pipeline = make_pipeline()
    run_sensor(pipeline, instance, "agent_versions_sensor")
    run_sensor(pipeline, instance, "eval_files_sensor")  # registers every test, for both versions
    rca = next(s for s in pipeline.suites if s.suite == "rca/payments")
    tests = rca.test_keys(instance)
    job = pipeline.defs.resolve_job_def(rca.names.job)
    quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
    # demo@v1 has every result of rca/payments, demo@v2 only its first test's
    assert job.execute_in_process(instance=instance, tags=range_tags(["demo@v1"], tests), run_config=quiet).success
    assert job.execute_in_process(instance=instance, tags=range_tags(["demo@v2"], tests[:1]), run_config=quiet).success

    first, _ = run_sensor(pipeline, instance, "agent_versions_sensor", json.dumps({}))
    assert ranges(first) == {
        ("evaluate__rca__payments", f"demo@v2|{tests[1]}", f"demo@v2|{tests[1]}"),
        ("evaluate__cases", "demo@v1|queue-backlog", "demo@v1|queue-backlog"),
        ("evaluate__cases", "demo@v2|queue-backlog", "demo@v2|queue-backlog"),
        ("evaluate__smoke_checks", "demo@v1|pure-data-check", "demo@v1|always-fails"),
        ("evaluate__smoke_checks", "demo@v2|pure-data-check", "demo@v2|always-fails"),
    }
    again, _ = run_sensor(pipeline, instance, "agent_versions_sensor", first.cursor)
    assert {r.run_key for r in again.run_requests} == {r.run_key for r in first.run_requests}  # launched once

    # while a suite is being evaluated, its gaps wait (that run may be the one filling them in)
    queued = instance.create_run_for_job(job, tags=range_tags(["demo@v2"], tests[1:]))
    assert instance.get_run_by_id(queued.run_id).status == DagsterRunStatus.NOT_STARTED
    waiting, _ = run_sensor(pipeline, instance, "agent_versions_sensor", first.cursor)
    assert {r.job_name for r in waiting.run_requests} == {"evaluate__cases", "evaluate__smoke_checks"}
    instance.delete_run(queued.run_id)

    monkeypatch.setenv("AGENT_HEALTH_EVALUATE_MISSING", "false")  # a deployment that backfills by hand
    off, _ = run_sensor(pipeline, instance, "agent_versions_sensor", first.cursor)
    assert off.run_requests == []
