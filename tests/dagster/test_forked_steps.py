"""Where the code location's steps run. By default (`AGENT_HEALTH_EXECUTOR` unset: `in_process`) in
the run worker itself. With `multiprocess` they start by forking from a server that imported the
code location once (Dagster's multiprocess executor with the `forkserver` start method), not from a
new interpreter per step, and a run config can still ask for `in_process` or its own start method.
Driven through `dagster job execute`, as a run worker runs a launched run; the agent, running
inside the step, reports which process started it."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.conftest import ROOT
from tests.support.dagster_plan import DAGSTER, register_partitions
from tests.support.timing import scaled

AGENT = """
import os
from pathlib import Path

def run(prompt):
    ppid = os.getppid()
    parent = Path(f"/proc/{ppid}/cmdline").read_bytes().replace(b"\\0", b" ").decode()
    with open(os.environ["AH_PARENTS"], "a") as out:
        out.write(f"{ppid} {parent}\\n")
    return {"output": "ok", "tool_calls": []}
"""

CONFIG = """
from agent_health import AgentSpec, define_config
config = define_config(agents=[
    AgentSpec(key="who", connector="python", settings={"function": "who_agent:run"}, versions={"v1": {}}),
], default_agent="who@v1")
"""

EVAL = "tests:\n  - name: first\n    prompt: one\n  - name: second\n    prompt: two\n"


@pytest.fixture
def project(tmp_path):
    """The multiprocess executor's project."""
    return make_project(tmp_path, AGENT_HEALTH_EXECUTOR="multiprocess")


def make_project(tmp_path, **settings: str) -> dict:
    code = tmp_path / "code"
    (code / "evals").mkdir(parents=True)
    (code / "evals" / "who.eval.yaml").write_text(EVAL)
    (code / "who_agent.py").write_text(AGENT.lstrip())
    (code / "agent_health_config.py").write_text(CONFIG.lstrip())
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HEALTH_", "DAGSTER_"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), str(code)]),
        DAGSTER_HOME=str(home),
        AGENT_HEALTH_CONFIG=str(code / "agent_health_config.py"),
        AGENT_HEALTH_EVAL_ROOT=str(code / "evals"),
        AGENT_HEALTH_STATE_DIR=str(tmp_path / "state"),
        AH_PARENTS=str(tmp_path / "parents.txt"),
        **settings,
    )
    plan = register_partitions(env)
    assert plan["problems"] == [] and len(plan["suites"]) == 1
    [(job, tests)] = plan["suites"].items()
    return {"env": env, "job": job, "tests": tests, "parents": tmp_path / "parents.txt", "tmp": tmp_path}


def execute(project, *extra: str) -> list[tuple[int, str]]:
    from agent_health_dagster.defs.partitions import range_tags

    project["parents"].unlink(missing_ok=True)
    tags = range_tags(["who@v1"], project["tests"])
    cmd = [DAGSTER, "job", "execute", "-m", "agent_health_dagster.definitions", "-a", "defs", "-j", project["job"]]
    out = subprocess.run(
        [*cmd, "--tags", json.dumps(tags), *extra],
        cwd=ROOT,
        env=project["env"],
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    lines = project["parents"].read_text().splitlines()
    return [(int(ppid), parent) for ppid, parent in (line.split(" ", 1) for line in lines)]


def test_by_default_a_runs_steps_run_in_the_run_worker(tmp_path):
    calls = execute(make_project(tmp_path))
    assert len(calls) == 2  # each test's agent call, in the suite's one step
    for ppid, parent in calls:  # in the run worker itself (`dagster job execute`, started by this test)
        assert ppid == os.getpid(), parent


def test_a_run_config_asking_for_multiprocess_forks_one_runs_steps_whatever_the_default(tmp_path):
    project = make_project(tmp_path)
    config = tmp_path / "multiprocess.yaml"
    config.write_text("execution:\n  config:\n    multiprocess: {}\n")
    calls = execute(project, "-c", str(config))
    assert len(calls) == 2
    for ppid, parent in calls:
        assert ppid != os.getpid() and "multiprocessing.forkserver" in parent, parent


def test_a_runs_steps_fork_from_a_server_that_imported_the_code_location_once(project):
    calls = execute(project)
    assert len(calls) == 2  # each test's agent call, in the suite's one step
    for ppid, parent in calls:
        # a spawned step's parent is the run worker (`dagster job execute` here)
        assert ppid != os.getpid() and "multiprocessing.forkserver" in parent, parent


def test_a_run_config_asking_for_in_process_still_runs_the_steps_in_the_run_worker(project):
    config = project["tmp"] / "in_process.yaml"
    config.write_text("execution:\n  config:\n    in_process: {}\n")
    calls = execute(project, "-c", str(config))
    assert len(calls) == 2
    for ppid, parent in calls:  # in the run worker itself, which this test started
        assert ppid == os.getpid(), parent


def test_a_run_config_naming_its_own_start_method_keeps_it(project):
    config = project["tmp"] / "spawn.yaml"
    config.write_text("execution:\n  config:\n    multiprocess:\n      start_method:\n        spawn: {}\n")
    calls = execute(project, "-c", str(config))
    assert len(calls) == 2
    for ppid, parent in calls:  # spawned by the run worker (`dagster job execute` here), not forked
        assert ppid != os.getpid() and "forkserver" not in parent and "job execute" in parent, parent
