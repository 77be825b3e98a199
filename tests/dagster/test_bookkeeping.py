"""Dagster's per-partition bookkeeping (docs/deploy.md, "Dagster bookkeeping"): the deployment's
Dagster settings (agent_health_dagster/dagster_env.py, deploy/dagster.env) reach the processes that read
them and change what a run writes, and large evaluations are split into runs of a bounded number
of partitions wherever the code location creates runs (sensors, schedule, headless job)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys

import pytest
from dagster import AssetKey, build_schedule_context

from agent_health_dagster.dagster_env import DAGSTER_ENV, apply_dagster_env, dagster_env
from agent_health_dagster.defs.partitions import RANGE_END_TAG, RANGE_START_TAG, bounded_ranges, range_tags
from agent_health_dagster.headless import QUIET, main, register
from tests.conftest import ROOT
from tests.dagster.planned_events import planned_events, worker_settings

pytestmark = pytest.mark.filterwarnings("ignore")


def read_env_file(path):
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return {name.strip(): value.strip() for name, value in pairs}


def test_the_env_file_and_the_python_settings_agree():
    assert read_env_file(ROOT / "deploy" / "dagster.env") == DAGSTER_ENV
    assert DAGSTER_ENV["DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"] == "1"
    assert int(DAGSTER_ENV["DAGSTER_EVENT_BATCH_SIZE"]) > 1


def test_the_operators_value_wins_and_nothing_is_set_on_import():
    environ = {"DAGSTER_EVENT_BATCH_SIZE": "50"}
    assert apply_dagster_env(environ) == {**DAGSTER_ENV, "DAGSTER_EVENT_BATCH_SIZE": "50"}
    assert environ["DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"] == "1"
    assert dagster_env({}) == DAGSTER_ENV
    # Loading the code location (what the webserver, daemon and run workers import) sets none of them.
    env = {k: v for k, v in os.environ.items() if k not in DAGSTER_ENV}
    code = (
        "import os, agent_health_dagster.definitions, agent_health_dagster.headless; "
        "print([k for k in %r if k in os.environ])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code % (list(DAGSTER_ENV),)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_bounded_ranges_cover_the_rectangle_in_runs_of_at_most_the_limit():
    agents, tests = ["a@v1", "a@v2", "a@v3"], [f"t{i}" for i in range(5)]
    everything = {(a, t) for a in agents for t in tests}
    assert bounded_ranges(agents, tests, None) == [(agents, tests)]
    assert bounded_ranges(agents, tests, 15) == [(agents, tests)]
    for limit in (1, 2, 4, 5, 7, 10, 14):
        ranges = bounded_ranges(agents, tests, limit)
        cells = [(a, t) for block, chunk in ranges for a in block for t in chunk]
        assert sorted(cells) == sorted(everything), limit  # every partition exactly once
        assert all(len(block) * len(chunk) <= limit for block, chunk in ranges), limit
        for block, chunk in ranges:  # each is a contiguous range of the registration order
            assert agents[agents.index(block[0]) :][: len(block)] == block
            assert tests[tests.index(chunk[0]) :][: len(chunk)] == chunk
    assert bounded_ranges(agents, tests, 10) == [(agents[:2], tests), (agents[2:], tests)]
    assert len(bounded_ranges(agents, tests, 2)) == 9  # 3 chunks of at most 2 tests per version


def test_with_the_settings_a_run_plans_once_per_asset_instead_of_once_per_partition(
    make_pipeline, instance, monkeypatch
):
    pipeline = make_pipeline()
    register(instance, pipeline)
    suite = next(s for s in pipeline.suites if s.suite == "rca/payments")
    job = pipeline.defs.resolve_job_def(suite.names.job)
    tests = list(instance.get_dynamic_partitions(suite.names.tests_partitions))
    tags = range_tags(["demo@v1", "demo@v2"], tests)  # 4 partitions

    for name in DAGSTER_ENV:
        monkeypatch.delenv(name, raising=False)
    stock = job.execute_in_process(instance=instance, tags=tags, run_config=QUIET)
    assert len(planned_events(instance, stock.run_id)) == 4  # each partition

    for name, value in DAGSTER_ENV.items():
        monkeypatch.setenv(name, value)
    tuned = job.execute_in_process(instance=instance, tags=tags, run_config=QUIET)
    planned = planned_events(instance, tuned.run_id)
    assert planned == [(suite.key("results"), None, 4)]  # once, with the run's subset
    # what the run materializes is the same either way
    records = instance.fetch_materializations(suite.key("results"), limit=100).records
    assert {r.partition_key for r in records if r.run_id == tuned.run_id} == {
        r.partition_key for r in records if r.run_id == stock.run_id
    }
    # the run worker logs what it writes its events with
    [line] = worker_settings(instance, tuned.run_id)
    assert "DAGSTER_EVENT_BATCH_SIZE=1000" in line and "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS=1" in line
    [stock_line] = worker_settings(instance, stock.run_id)
    assert "DAGSTER_EVENT_BATCH_SIZE=(unset)" in stock_line


def test_the_headless_job_runs_with_the_settings_and_bounds_partitions_per_run(project_dir, tmp_path, monkeypatch):
    from dagster import DagsterInstance

    monkeypatch.setenv("AGENT_HEALTH_CONFIG", str(project_dir / "agent_health_config.py"))
    monkeypatch.setenv("AGENT_HEALTH_MAX_PARTITIONS_PER_RUN", "2")
    for name in DAGSTER_ENV:
        monkeypatch.delenv(name, raising=False)  # restored afterwards; main() sets them for its own runs
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert main(["--dagster-home", str(home)]) == 1  # the demo's failing check; the runs all succeeded
    with DagsterInstance.from_config(str(home)) as instance:
        evaluations = [r for r in instance.get_runs() if r.job_name.startswith("evaluate__")]
        # rca/payments and smoke_checks: 2 tests x 2 versions in runs of 2; cases: 1 test x 2 versions
        assert len(evaluations) == 2 + 2 + 1
        for run in evaluations:
            planned = planned_events(instance, run.run_id)
            assert len(planned) == 1 and all(p is None and 1 <= n <= 2 for _, p, n in planned), planned
        results = instance.fetch_materializations(AssetKey(["rca", "payments", "results"]), limit=100).records
        assert len({r.partition_key for r in results}) == 4


def test_sensors_and_schedule_split_large_requests_into_bounded_runs(make_pipeline, instance, monkeypatch):
    monkeypatch.setenv("AGENT_HEALTH_MAX_PARTITIONS_PER_RUN", "1")
    pipeline = make_pipeline()
    sensors = {s.name: s for s in pipeline.defs.get_repository_def().sensor_defs}
    from dagster import build_sensor_context

    from agent_health_dagster.headless import apply_sensor_result

    def run(name):
        with build_sensor_context(instance=instance, resources={"agent_health": pipeline.resource}) as ctx:
            result = sensors[name](ctx)
        apply_sensor_result(instance, result)
        return result

    run("agent_versions_sensor")
    files = run("eval_files_sensor")
    rca = [r for r in files.run_requests if r.job_name == "evaluate__rca__payments"]
    # 2 new tests x 2 versions, one partition per run, every run key distinct
    assert len(rca) == 4 and len({r.run_key for r in files.run_requests}) == len(files.run_requests)
    assert all(r.tags[RANGE_START_TAG] == r.tags[RANGE_END_TAG] for r in rca)
    schedule = pipeline.defs.get_repository_def().get_schedule_def("nightly__rca__payments")
    with build_schedule_context(
        instance=instance,
        resources={"agent_health": pipeline.resource},
        scheduled_execution_time=dt.datetime(2026, 1, 2, 2, 0, tzinfo=dt.UTC),
    ) as context:
        nightly = schedule(context)
    assert len(nightly) == 4 and len({r.run_key for r in nightly}) == 4
