"""The headless main job: the whole pipeline through Dagster on a persistent local instance."""

from __future__ import annotations

import re

import pytest
from dagster import AssetKey, DagsterInstance

from agent_health_dagster.headless import main, register

pytestmark = pytest.mark.filterwarnings("ignore")


def test_headless_runs_everything_and_says_how_to_open_the_ui(project_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_HEALTH_CONFIG", str(project_dir / "agent_health_config.py"))
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # restored afterwards; main() points it at --dagster-home
    assert main(["--dagster-home", str(home)]) == 1  # demo@v1 misses the cases suite's pass rate
    captured = capsys.readouterr()
    out = captured.out
    assert "3 suite(s)" in out and "rca/payments: evaluating 2 test(s) x 2 version(s)" in out
    # the checks are said, the failed one with why, and the exit code says so too
    assert re.search(r"Checks: \d+ passed, 1 failed", out)
    assert "FAILED pass_rate_threshold on cases/rollup @ demo@v1: pass rate 0.0% (threshold 50.0%)" in out
    assert "1 asset check(s) failed (exit 1)" in captured.err
    assert "Leaderboard" in out and re.search(r"demo@v2 +current +\* +60\.0 ", out)
    assert "Comparison (demo@v2 against its baseline)" in out
    assert re.search(r"cases::queue-backlog +fixed +failed +passed", out)
    assert re.search(rf"DAGSTER_HOME={re.escape(str(home.resolve()))} bash \S*scripts/dev.sh", out)
    with DagsterInstance.from_config(str(home)) as instance:  # the same assets, on the persistent instance
        rollup = instance.fetch_materializations(AssetKey(["rca", "payments", "rollup"]), limit=10).records
        assert {r.partition_key for r in rollup} == {"demo@v1", "demo@v2"}
        comparison = instance.fetch_materializations(AssetKey(["benchmark", "comparison"]), limit=10).records
        assert {r.partition_key for r in comparison} == {"demo@v1", "demo@v2"}
        # one run per suite, then one refresh run per version
        assert sorted(r.job_name for r in instance.get_runs()).count("refresh") == 2
        assert len(instance.get_runs()) == 3 + 2
    assert "run_monitoring" in (home / "dagster.yaml").read_text()


def test_headless_rejects_unknown_agent_versions(project_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_HEALTH_CONFIG", str(project_dir / "agent_health_config.py"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert main(["--dagster-home", str(tmp_path / "home"), "--agents", "demo@v1,demo@v9"]) == 2
    assert "unknown agent version(s) demo@v9; configured: demo@v1, demo@v2" in capsys.readouterr().err


def test_headless_tables_never_wrap(project_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENT_HEALTH_CONFIG", str(project_dir / "agent_health_config.py"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "80")
    main(["--dagster-home", str(tmp_path / "home")])
    out = capsys.readouterr().out
    tables = out.split("Leaderboard", 1)[1].split("Checks:", 1)[0]
    assert max(len(line) for line in tables.splitlines()) <= 80, tables
    assert "not shown at 80 columns" in tables  # what was left out is said


def test_the_headless_refresh_waits_for_a_versions_other_runs_but_not_for_stalled_ones(make_pipeline, instance, capsys):
    """Its in-process runs skip the queue that keeps a version's runs in creation order: it waits
    for another run of the version while that run makes progress or a daemon is alive to start it,
    and not for one nothing works on."""
    import threading
    import time

    from dagster import DagsterRunStatus

    from agent_health_dagster.headless import daemon_alive, wait_for_runs_of

    assert not daemon_alive(instance)  # no daemon ever ran on this instance

    pipeline = make_pipeline()
    register(instance, pipeline)
    job = pipeline.defs.resolve_job_def("refresh")
    stalled = instance.create_run_for_job(job, tags={"dagster/partition": "demo@v1"})
    start = time.monotonic()
    wait_for_runs_of(instance, "demo@v1", poll_s=0.1, idle_s=1.0)
    assert 1.0 <= time.monotonic() - start < 10  # no daemon dequeues it: not waited for past the idle time
    assert (
        f"run(s) {stalled.run_id[:8]} (NOT_STARTED) of demo@v1 made no progress for 1 s and no daemon works"
        in capsys.readouterr().out
    )
    # ... and one that last changed before the wait began (queued while `dagster dev` ran, then
    # `dagster dev` stopped) has been idle since, by the instance's record: not waited for again
    time.sleep(1.5)  # its record is older than the idle time and the storage's one-second resolution
    start = time.monotonic()
    wait_for_runs_of(instance, "demo@v1", poll_s=0.1, idle_s=1.0)
    assert time.monotonic() - start < 0.9
    assert f"run(s) {stalled.run_id[:8]} (NOT_STARTED) of demo@v1 made no progress for" in capsys.readouterr().out
    instance.delete_run(stalled.run_id)

    # a daemon is alive: a run it has not started yet (say, queued on a busy machine) is waited for
    # past the idle time, until it ends; refreshing beside it would leave the version's checks blank
    queued = instance.create_run_for_job(job, tags={"dagster/partition": "demo@v1"})
    ended = threading.Timer(2.0, lambda: instance.report_run_canceled(queued))
    ended.start()
    start = time.monotonic()
    wait_for_runs_of(instance, "demo@v1", poll_s=0.1, idle_s=0.3, alive=lambda _: True, note_s=0.8)
    assert 1.9 <= time.monotonic() - start < 10
    assert instance.get_run_by_id(queued.run_id).status == DagsterRunStatus.CANCELED
    said = capsys.readouterr().out
    assert "made no progress" not in said
    assert f"still waiting for run(s) {queued.run_id[:8]} (NOT_STARTED) of demo@v1: no progress for " in said

    going = instance.create_run_for_job(job, tags={"dagster/partition": "demo@v2"})
    ended = threading.Timer(1.5, lambda: instance.report_run_canceled(going))
    ended.start()
    start = time.monotonic()
    wait_for_runs_of(instance, "demo@v2", poll_s=0.1, idle_s=30.0)  # returns once it ends, not after 30 s
    assert 1.4 <= time.monotonic() - start < 10
    assert instance.get_run_by_id(going.run_id).status == DagsterRunStatus.CANCELED
    assert "made no progress" not in capsys.readouterr().out
