"""The distributed route of docs/deploy.md, live: PostgreSQL (deploy/postgres/dagster.yaml), S3 (moto),
Redis as the Celery broker, `dagster-daemon run` with $AGENT_HEALTH_EXECUTOR=celery, and two Celery
workers started with the documented command, as on two machines (their own Dagster homes and state
folders). The daemon's own automation registers the partitions and requests the evaluation runs
(one run per agent version here). The setup commands and the workers' sharing of tasks are
tested on their own first.

What a team relies on: two workers run two evaluation steps at once; a worker killed mid-step
(SIGKILL of its whole process group, as a lost machine) leaves a run that run monitoring fails at
the instance's maximum runtime, the pool slot its dead step held is freed, and the run retry the
instance configures completes every partition on the surviving worker. The instance file is the
template with only its time limits shortened for the test."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.core.test_docs_examples import block
from tests.core.test_readme_commands import commands
from tests.deploy.conftest import TEMPLATE
from tests.evalkit import RCA
from tests.support.postgres import fresh_database
from tests.support.s3 import new_bucket
from tests.support.timing import scaled

# The agent: each call waits until the test opens the gate, so both evaluation steps are in the
# middle of their agent calls when the test looks, whatever the machine's speed.
GATE_AGENT = """
import os, time
from pathlib import Path

def run(prompt):
    gate = Path(os.environ["AH_TEST_GATE"])
    deadline = time.monotonic() + 600
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return {"output": "the payment-service cannot reach db-primary", "tool_calls": []}
"""

pytest.importorskip("dagster_celery", reason="the celery extra is not installed (pip install '.[celery]')")

BIN = Path(sys.executable).parent
POOL = "agent_health_agents"
POLL_S = 2  # run monitoring's poll interval, and the delay before a dead step's slot is freed


def _step_on(instance: Any, run_id: str, running: bool = True) -> str | None:
    """The Celery worker (its hostname) that took the run's evaluation step, once the step started
    (and, with `running`, while it has not ended)."""
    from dagster import DagsterEventType

    started, ended, host = False, False, None
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None:
            continue
        if event.event_type == DagsterEventType.STEP_START:
            started = True
        elif event.event_type in (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE):
            ended = True
        elif event.event_type == DagsterEventType.ENGINE_EVENT and "Celery worker" in (
            event.engine_event_data.metadata or {}
        ):
            host = str(event.engine_event_data.metadata["Celery worker"].value)
    return host if started and not (running and ended) else None


def doc_commands(head: str) -> list[tuple[str, int]]:
    """The commands of docs/deploy.md's shell block that starts with `head`, with their exit codes."""
    return commands(block("deploy.md", head))


def _env_with_venv(env: dict[str, str]) -> dict[str, str]:
    """`env` with the tested virtualenv's commands first on PATH (as an activated deployment venv)."""
    return {**env, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"}


def test_the_routes_setup_commands_run_as_written(tmp_path, postgres, s3_endpoint, redis_url, monkeypatch):
    """Steps 1-3 of docs/deploy.md's Celery route: the instance's role and database, the bucket,
    the broker check; then the template opens that database as that role."""
    import boto3
    from dagster import DagsterInstance

    role = f"team_{uuid.uuid4().hex[:8]}"
    env = _env_with_venv(dict(os.environ))
    env.update(
        # the administrator's connection (the session's server trusts 127.0.0.1)
        PGHOST=postgres.host,
        PGPORT=str(postgres.port),
        PGUSER=postgres.user,
        PGDATABASE=postgres.db,
        # the instance's
        DAGSTER_PG_HOST=postgres.host,
        DAGSTER_PG_PORT=str(postgres.port),
        DAGSTER_PG_USERNAME=role,
        DAGSTER_PG_PASSWORD=f"pw-{uuid.uuid4().hex}",
        DAGSTER_PG_DB=f"{role}_dagster",
        AWS_ENDPOINT_URL=s3_endpoint,
        AWS_DEFAULT_REGION="eu-west-1",
        AGENT_HEALTH_CELERY_BROKER=f"{redis_url}/2",
    )
    outputs = []
    for head in ("# 1. the instance's role", "# 2. the result store's bucket", "# 3. the broker answers"):
        for command, code in doc_commands(head):
            done = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == code, (command, done.stdout[-2000:] + done.stderr[-2000:])
            outputs.append(done.stdout)
    assert outputs[-1].strip() == "PONG"
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="eu-west-1")
    assert s3.get_bucket_location(Bucket="team-agent-evals")["LocationConstraint"] == "eu-west-1"

    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(TEMPLATE, home / "dagster.yaml")
    for name in ("DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_USERNAME", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_DB"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with DagsterInstance.get() as instance:  # Dagster creates its tables as the role
        assert instance.get_runs() == []
    owner = subprocess.run(
        ["psql", "-tAc", "SELECT tableowner FROM pg_tables WHERE tablename = 'runs'", env["DAGSTER_PG_DB"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert owner.stdout.strip() == role, owner.stderr


def test_a_worker_without_the_broker_variable_stops_naming_it():
    """Not dagster-celery's default, RabbitMQ on localhost: the documented command needs the variable."""
    [(worker_command, _)] = doc_commands("# 5. a Celery worker")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HEALTH_CELERY_")}
    done = subprocess.run(
        ["bash", "-c", worker_command], cwd=ROOT, env=_env_with_venv(env), capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        "agent-health: $AGENT_HEALTH_EXECUTOR=celery needs $AGENT_HEALTH_CELERY_BROKER, the broker URL "
        "(redis://host:6379/0) of the run workers and the Celery workers"
    )


def test_a_busy_worker_leaves_the_next_task_to_an_idle_one(redis_url, monkeypatch):
    """With Celery's prefetching (even `worker_prefetch_multiplier: 1`, a task acknowledged when it
    starts) a worker busy with a long task reserves the next one while another worker that
    finished its own sits idle; the project's workers take a task only into a free slot."""
    broker = f"{redis_url}/3"
    monkeypatch.setenv("AGENT_HEALTH_CELERY_BROKER", broker)
    env = _env_with_venv({**os.environ, "PYTHONPATH": str(ROOT)})
    [(worker_command, _)] = doc_commands("# 5. a Celery worker")
    worker_command = worker_command.replace("agent_health_dagster.celery_worker", "tests.deploy.celery_probe")
    workers = []
    try:
        for name in ("worker-1", "worker-2"):
            workers.append(
                subprocess.Popen(
                    ["bash", "-c", f"exec {worker_command.replace('worker-a@', f'{name}@')} -l WARNING"],
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        from tests.deploy.celery_probe import app, hold

        deadline = time.monotonic() + scaled(60)
        while len(app.control.ping(timeout=1.0)) < 2:  # both workers up and consuming
            assert time.monotonic() < deadline, "the two Celery workers did not start"
        first = hold.delay(scaled(6))
        time.sleep(0.5)
        second = hold.delay(scaled(1))
        time.sleep(0.5)
        third = hold.delay(0.1)  # both workers busy when it comes
        wait = scaled(60)
        ran = [first.get(timeout=wait), second.get(timeout=wait), third.get(timeout=wait)]
    finally:
        for proc in workers:
            _stop_group(proc)
    assert ran[0] != ran[1], ran  # the first two went to the two workers
    assert ran[2] == ran[1], f"the third task was reserved by {ran[2]}, busy with the long one: {ran}"


def _kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def _stop_group(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM the process group (a daemon and its code server and run workers; a Celery worker and
    its pool), SIGKILL what is left after `timeout` seconds."""
    _kill_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    _kill_group(proc, signal.SIGKILL)
    proc.wait()


@pytest.mark.slow
def test_a_killed_celery_worker_fails_its_run_frees_its_slot_and_the_retry_completes(
    tmp_path, postgres, s3_endpoint, redis_url, monkeypatch
):
    from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

    from agent_health_dagster.defs.build import build_pipeline

    limit = int(scaled(25))  # this test's run limit: over twice a run's own 5-10 s (quiet machine)
    project = tmp_path / "project"
    (project / "evals" / "rca").mkdir(parents=True)
    (project / "evals" / "rca" / "payments.eval.py").write_text(RCA)  # one suite of two tests
    store = {"type": "s3", "settings": {"bucket": new_bucket(s3_endpoint), "endpoint_url": s3_endpoint}}
    (project / "gate_agent.py").write_text(GATE_AGENT)  # under the built-in demo agent's key: it replaces it
    (project / "agent_health_config.py").write_text(
        "from agent_health import AgentSpec, define_config\nconfig = define_config(\n"
        "    agents=[AgentSpec(key='demo', connector='python', settings={'function': 'gate_agent:run'},"
        " versions={'v1': {}, 'v2': {}})],\n"
        f"    store={store!r},\n)\n"
    )
    gate = tmp_path / "gate"
    db = fresh_database(postgres, "dagster_celery_route")
    instance_file = yaml.safe_load(TEMPLATE.read_text())
    monitoring = instance_file["run_monitoring"]
    assert monitoring["enabled"] and monitoring["free_slots_after_run_end_seconds"] > 0
    monitoring.update(max_runtime_seconds=limit, poll_interval_seconds=POLL_S, free_slots_after_run_end_seconds=POLL_S)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HEALTH_", "DAGSTER_"))}
    base.update(
        db.env(),
        PYTHONPATH=str(ROOT),
        AGENT_HEALTH_CONFIG=str(project / "agent_health_config.py"),
        AGENT_HEALTH_EVAL_ROOT=str(project / "evals"),
        AGENT_HEALTH_EXECUTOR="celery",
        AGENT_HEALTH_CELERY_BROKER=f"{redis_url}/1",
        AGENT_HEALTH_MAX_PARTITIONS_PER_RUN="2",  # a run per agent version
        AGENT_HEALTH_SENSOR_INTERVAL_S="3",
        AH_TEST_GATE=str(gate),
        AGENT_HEALTH_SKIP_JUDGE="1",
    )

    def machine(name: str) -> dict[str, str]:
        home = tmp_path / name / "dagster_home"
        home.mkdir(parents=True)
        (home / "dagster.yaml").write_text(yaml.safe_dump(instance_file, sort_keys=False))
        return {**base, "DAGSTER_HOME": str(home), "AGENT_HEALTH_STATE_DIR": str(tmp_path / name / "state")}

    daemon_env = machine("daemon")
    for name, value in daemon_env.items():
        monkeypatch.setenv(name, value)
    pipeline = build_pipeline()
    [suite] = pipeline.suites
    logs = tmp_path / "logs"
    logs.mkdir()

    def start(name: str, command: str, env: dict[str, str]) -> subprocess.Popen:
        """`command` as docs/deploy.md writes it, in its own process group (a "machine")."""
        with open(logs / f"{name}.log", "w") as out:
            return subprocess.Popen(
                ["bash", "-c", f"exec {command}"],
                cwd=ROOT,
                env=_env_with_venv(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log_tail() -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-2500:]}" for p in sorted(logs.iterdir()))

    # The documented commands: a Celery worker on each "machine", the daemon on a third.
    [(worker_command, _)] = doc_commands("# 5. a Celery worker")
    [(daemon_command, _)] = doc_commands("# 4. the daemon")
    assert "worker-a@" in worker_command
    workers = {
        name: start(name, worker_command.replace("worker-a@", f"{name}@"), machine(name))
        for name in ("worker-a", "worker-b")
    }
    daemon = start("daemon", daemon_command, daemon_env)
    try:
        with DagsterInstance.get() as instance:

            def evaluations() -> list[Any]:
                return instance.get_runs(RunsFilter(job_name=suite.names.job))

            def wait(what: str, seconds: float, until: Any) -> Any:
                deadline = time.monotonic() + scaled(seconds)
                while time.monotonic() < deadline:
                    assert daemon.poll() is None, log_tail()
                    found = until()
                    if found:
                        return found
                    time.sleep(0.5)
                pytest.fail(f"{what} within {scaled(seconds):.0f}s\n{log_tail()}")

            def running_steps() -> dict[str, str]:
                """worker hostname -> run id, of evaluation steps started and not finished"""
                out = {}
                for run in evaluations():
                    if run.status == DagsterRunStatus.STARTED and (host := _step_on(instance, run.run_id)):
                        out[host.split("@")[0]] = run.run_id
                return out

            # Two workers run two steps at once (the pool allows two).
            both = wait(
                "two evaluation steps at once on the two workers", 180, lambda: len(r := running_steps()) > 1 and r
            )
            assert set(both) == {"worker-a", "worker-b"}, both
            doomed = both["worker-a"]

            def holds_a_slot() -> bool:
                info = instance.event_log_storage.get_concurrency_info(POOL)
                return any(slot.run_id == doomed for slot in info.claimed_slots)

            assert holds_a_slot()  # its step holds one of the pool's two slots
            _kill_group(workers["worker-a"])  # a lost machine: the worker and its pool process
            workers["worker-a"].wait()
            gate.touch()  # the other step's agent calls return

            # Run monitoring fails the run at the instance's maximum runtime.
            failed = wait(
                "the dead worker's run ends",
                limit + 60,
                lambda: (r := instance.get_run_record_by_id(doomed)) and r.dagster_run.is_finished and r,
            )
            assert failed.dagster_run.status == DagsterRunStatus.FAILURE, failed.dagster_run.status
            took = failed.end_time - failed.start_time
            assert limit <= took <= limit + POLL_S + scaled(15), (took, limit)

            # The pool slot its dead step held is freed, and the run is retried.
            wait("the dead step's pool slot freed", 30, lambda: not holds_a_slot())

            def retried() -> Any:
                """A successful retry: Dagster's (`run_retries`), or the project's sensor for a retry
                Dagster's marked and missed (agent_health_dagster/defs/retries.py)"""
                for run in instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.SUCCESS])):
                    if doomed in (run.tags.get("dagster/parent_run_id"), run.tags.get("agent_health/retry_of")):
                        return run
                return None

            retry = wait("a successful retry of the failed run", limit * 3, retried)
            assert instance.get_run_by_id(doomed).tags.get("dagster/will_retry") == "true"
            assert str(_step_on(instance, retry.run_id, running=False)).startswith("worker-b@")
            assert {k: v for k, v in retry.tags.items() if k.startswith("dagster/asset_partition_range")} == {
                k: v for k, v in failed.dagster_run.tags.items() if k.startswith("dagster/asset_partition_range")
            }

            # Every partition completes: both configured versions x both tests have results.
            def done() -> set[str]:
                from dagster import AssetKey

                return set(instance.get_materialized_partitions(AssetKey(suite.key("results").path)))

            tests = suite.test_keys(instance)
            expected = {f"{agent}|{test}" for agent in ("demo@v1", "demo@v2") for test in tests}
            assert len(expected) == 4
            wait("every partition materialized", limit * 3, lambda: done() >= expected)
    finally:
        _stop_group(daemon)
        for proc in workers.values():
            _stop_group(proc)
    for name in ("worker-a", "worker-b"):
        shutil.rmtree(tmp_path / name / "state", ignore_errors=True)
