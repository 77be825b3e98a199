"""deploy/postgres/dagster.yaml on a real PostgreSQL (and through PgBouncer): it loads with Dagster's
public instance API, stores runs and partitions, queues runs, and the `agent_health_agents` pool
makes evaluation steps of concurrent runs wait for each other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.deploy.conftest import PgHome, make_home
from tests.evalkit import write_config, write_evals
from tests.support.dagster_plan import DAGSTER
from tests.support.processes import stop
from tests.support.timing import scaled

DAEMON = str(Path(sys.executable).parent / "dagster-daemon")


def open_instance(home: PgHome, monkeypatch: pytest.MonkeyPatch):
    from dagster import DagsterInstance

    for name, value in home.env().items():
        monkeypatch.setenv(name, value)
    return DagsterInstance.get()


@pytest.mark.parametrize("through", ["postgres", "pgbouncer"])
def test_the_template_loads_and_stores_on_postgres(through, request, tmp_path, postgres, monkeypatch):
    from dagster import DagsterRunStatus, RunsFilter

    via = request.getfixturevalue("pgbouncer") if through == "pgbouncer" else None
    home = make_home(tmp_path, postgres, via=via)
    with open_instance(home, monkeypatch) as instance:
        assert type(instance.run_storage).__module__.startswith("dagster_postgres")
        assert type(instance.event_log_storage).__module__.startswith("dagster_postgres")
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        concurrency = instance.get_concurrency_config()
        assert concurrency.run_queue_config.max_concurrent_runs == 4
        assert concurrency.pool_config.default_pool_limit == 2
        instance.add_dynamic_partitions("agent_versions", ["demo@v1", "demo@v2"])
        assert instance.get_dynamic_partitions("agent_versions") == ["demo@v1", "demo@v2"]
        assert instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.QUEUED])) == []
    # a second process (another machine) sees what the first stored
    env = {**os.environ, **home.env()}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from dagster import DagsterInstance\n"
            "print(DagsterInstance.get().get_dynamic_partitions('agent_versions'))",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "['demo@v1', 'demo@v2']"


def test_a_bare_postgresql_scheme_falls_into_the_sqlalchemy_21_psycopg_trap(tmp_path, postgres, monkeypatch):
    """Why the template names psycopg2: SQLAlchemy 2.1 maps postgresql:// to psycopg 3."""
    import sqlalchemy

    if int(sqlalchemy.__version__.split(".")[0]) < 2 or sqlalchemy.__version__.startswith("2.0"):
        pytest.skip(f"SQLAlchemy {sqlalchemy.__version__} still maps postgresql:// to psycopg2")
    home = make_home(tmp_path, postgres)
    text = (home.path / "dagster.yaml").read_text()
    assert "scheme: postgresql+psycopg2" in text
    (home.path / "dagster.yaml").write_text(text.replace("scheme: postgresql+psycopg2", "scheme: postgresql"))
    with pytest.raises(ModuleNotFoundError, match="psycopg"), open_instance(home, monkeypatch) as instance:
        instance.get_runs()


def _launch(home: PgHome, project: Path, job: str, tags: dict[str, str]) -> None:
    config = project / "in_process.yaml"  # one process per run: the steps of a run share it
    config.write_text("execution:\n  config:\n    in_process: {}\n")
    out = subprocess.run(
        [DAGSTER, "job", "launch", "-w", "workspace.yaml", "-j", job, "--tags", json.dumps(tags), "-c", str(config)],
        cwd=ROOT,
        env=_env(home, project),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]


def _env(home: PgHome, project: Path) -> dict[str, str]:
    env = {**os.environ, **home.env(), "PYTHONPATH": str(ROOT)}
    env.update(
        AGENT_HEALTH_CONFIG=str(project / "agent_health_config.py"),
        AGENT_HEALTH_EVAL_ROOT=str(project / "evals"),
        AGENT_HEALTH_STATE_DIR=str(project / "state"),
        AGENT_HEALTH_DEMO_LATENCY_MS="8000",  # every agent run takes 8 s: without the pool, the runs overlap
        AGENT_HEALTH_SKIP_JUDGE="1",
    )
    return env


@pytest.mark.slow
def test_runs_wait_on_the_agent_pool(tmp_path, postgres, monkeypatch):
    from dagster import DagsterEventType, DagsterRunStatus

    from agent_health_dagster.defs.build import build_pipeline
    from agent_health_dagster.defs.partitions import range_tags
    from agent_health_dagster.headless import register

    project = tmp_path / "project"
    write_evals(project)
    write_config(project)
    home = make_home(tmp_path, postgres)
    for name, value in _env(home, project).items():
        monkeypatch.setenv(name, value)
    pipeline = build_pipeline()
    suite = next(s for s in pipeline.suites if s.suite == "rca/payments")
    with open_instance(home, monkeypatch) as instance:
        register(instance, pipeline)
        tests = instance.get_dynamic_partitions(suite.names.tests_partitions)
    # The documented command for this pool's own limit.
    cli = subprocess.run(
        [DAGSTER, "instance", "concurrency", "set", "agent_health_agents", "1"],
        env=_env(home, project),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr[-2000:]
    # Two runs (one per agent version), queued; the daemon starts both (run limit 4).
    for agent in ("demo@v1", "demo@v2"):
        _launch(home, project, suite.names.job, range_tags([agent], tests[:1]))
    with open_instance(home, monkeypatch) as instance:
        queued = instance.get_runs()
        assert len(queued) == 2 and {r.status for r in queued} == {DagsterRunStatus.QUEUED}
    daemon = subprocess.Popen(
        [DAEMON, "run", "-w", "workspace.yaml"],
        cwd=ROOT,
        env=_env(home, project),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + scaled(180)
        with open_instance(home, monkeypatch) as instance:

            def evaluations():  # the two runs (the refresh sensor may add a refresh run after them)
                return [r for r in instance.get_runs() if r.job_name == suite.names.job]

            while time.monotonic() < deadline:
                runs = evaluations()
                if all(r.is_finished for r in runs):
                    break
                time.sleep(1)
            runs = evaluations()
            stuck = [r for r in runs if r.status != DagsterRunStatus.SUCCESS]
            assert not stuck, [
                (e.dagster_event_type, e.message[:200]) for r in stuck for e in instance.all_logs(r.run_id)
            ][-8:]
            # Per run: when it started, and when its first step (the pooled evaluation) started and ended.
            spans = []
            for run in runs:
                logs = instance.all_logs(run.run_id)
                at = {
                    kind: [e.timestamp for e in logs if e.dagster_event_type == kind]
                    for kind in (
                        DagsterEventType.RUN_STARTING,
                        DagsterEventType.STEP_START,
                        DagsterEventType.STEP_SUCCESS,
                    )
                }
                spans.append(tuple(min(at[k]) for k in at))
    finally:
        stop(daemon, timeout=60)
    (_, a_step, a_end), (b_run, b_step, _) = sorted(spans)
    # The run limit is 4, so only the pool (limit 1) kept the second run queued: it started only
    # once the first had finished its evaluation step (an 8 s agent call), and never overlapped it.
    assert b_run >= a_end, f"the second run started while the first held the agent pool: {spans}"
    assert b_step > a_end and b_run - a_step > 5, spans


def test_every_instance_file_ends_a_dead_workers_run_and_retries_it(tmp_path, monkeypatch):
    """deploy/postgres/dagster.yaml and the local instance of scripts/dev.sh and the headless job
    (`instance_yaml`) monitor runs with the same settings: a maximum runtime sized from what an
    evaluation run can take, the slots of a dead step freed after its run ended, and run retries
    (tests/deploy/test_celery_route.py kills a worker under them)."""
    import yaml

    from agent_health.config import sized_run_seconds
    from agent_health_dagster.defs.build import run_limit_seconds
    from agent_health_dagster.headless import instance_yaml
    from tests.deploy.conftest import TEMPLATE

    monkeypatch.chdir(tmp_path)  # no project configuration: the defaults
    for name in [n for n in os.environ if n.startswith("AGENT_HEALTH_") and n != "AGENT_HEALTH_TEST_SESSION"]:
        monkeypatch.delenv(name)
    template = yaml.safe_load(TEMPLATE.read_text())
    local = yaml.safe_load(instance_yaml())
    for doc in (template, local):
        monitoring = doc["run_monitoring"]
        assert monitoring["enabled"] and monitoring["max_resume_run_attempts"] == 0
        assert 0 < monitoring["free_slots_after_run_end_seconds"] <= 60
        assert doc["run_retries"]["enabled"] and doc["run_retries"]["max_retries"] >= 1
    assert template["run_monitoring"] == local["run_monitoring"]
    assert template["run_retries"] == local["run_retries"]
    # 1,000 partitions per run, concurrency 8, 120 s per test, 1 epoch
    assert template["run_monitoring"]["max_runtime_seconds"] == run_limit_seconds() == sized_run_seconds(1000, 8, 120)
    # what docs/deploy.md tells an operator to run for their own figure
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HEALTH_") or k == "AGENT_HEALTH_TEST_SESSION"}
    printed = subprocess.run(
        [sys.executable, "-m", "agent_health_dagster.headless", "--run-limit"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT), "AGENT_HEALTH_CONCURRENCY": "16"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert printed.returncode == 0 and printed.stdout.strip() == str(sized_run_seconds(1000, 16, 120)), printed.stderr
    # sized from the settings when the file is written; the variable over it
    monkeypatch.setenv("AGENT_HEALTH_MAX_PARTITIONS_PER_RUN", "100")
    monkeypatch.setenv("AGENT_HEALTH_TIMEOUT", "30")
    assert yaml.safe_load(instance_yaml())["run_monitoring"]["max_runtime_seconds"] == 13 * 30 * 1.5 + 600
    monkeypatch.setenv("AGENT_HEALTH_MAX_RUN_SECONDS", "900")
    assert yaml.safe_load(instance_yaml())["run_monitoring"]["max_runtime_seconds"] == 900
