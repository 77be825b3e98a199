"""The in-process CLI the tests use (tests/support/cli.py) leaves the test process as a new process
would find it: each project's own agent module, no leftover working folder, environment, sys.path,
logging handler or signal handler, and the library's warnings on the command's stderr."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from pathlib import Path

from tests.support.cli import cli_in_process

CONFIG = """
from agent_health import define_config

config = define_config(
    agents=[{"key": "mine", "connector": "python", "settings": {"function": "agent:run"}, "versions": {"v1": {}}}],
)
"""


def project(root: Path, answer: str) -> Path:
    (root / "evals").mkdir(parents=True)
    (root / "evals" / "one.yaml").write_text("tests:\n  - name: one\n    prompt: hi\n")
    agent = f"import os\n\n\ndef run(prompt):\n    return {answer!r} + os.environ.get('EXTRA', '')\n"
    (root / "agent.py").write_text(agent)
    (root / "agent_health_config.py").write_text(CONFIG)
    return root


def output(root: Path, env: dict[str, str] | None = None) -> str:
    args = ("run", "evals", "--agent", "mine@v1", "--no-judge", "--no-store", "--reporter", "json=r.json")
    p = cli_in_process(*args, cwd=root, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Running 1 test(s) against mine@v1" in p.stdout
    [result] = json.loads((root / "r.json").read_text())["results"]
    return str(result["run"]["output"])


def test_two_projects_run_one_after_the_other_each_with_its_own_agent_module(tmp_path):
    cwd, env, path = os.getcwd(), dict(os.environ), list(sys.path)
    handlers = logging.getLogger().handlers[:]
    sigint, sigterm = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)

    assert output(project(tmp_path / "a", "from A"), env={"EXTRA": "!"}) == "from A!"
    assert output(project(tmp_path / "b", "from B")) == "from B"  # not A's cached `agent` module, nor its env

    assert os.getcwd() == cwd and dict(os.environ) == env and sys.path == path
    assert "agent" not in sys.modules and logging.getLogger().handlers == handlers
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == (sigint, sigterm)


def test_a_usage_error_is_the_exit_code_and_message_a_process_gives(tmp_path):
    p = cli_in_process("run", "nowhere", cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("error: ") and "nowhere" in p.stderr
