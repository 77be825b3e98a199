"""A subprocess agent's descendant that calls `setsid()` (a daemon: double fork, its own session
and process group) outlived the run: killing the agent's process group cannot reach it. Now every
process an agent starts carries a tag in its environment, and the processes with the agent's tag
are killed when the agent exits or times out, wherever their session is."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.faults.conftest import cli

AGENT = """
import os, sys, time

PID_FILE = {pid_file!r}
if os.fork() == 0:  # a daemon: its own session, its parent gone
    os.setsid()
    if os.fork():
        os._exit(0)
    for fd in (0, 1, 2):  # it lets go of the agent's pipes
        os.close(fd)
    with open(PID_FILE + ".tmp", "w") as fh:
        fh.write(str(os.getpid()))
    os.rename(PID_FILE + ".tmp", PID_FILE)
    time.sleep(120)
    os._exit(0)
os.wait()
while not os.path.exists(PID_FILE):
    time.sleep(0.01)
print("the payment service cannot reach its database", flush=True)
if {hangs!r}:
    time.sleep(120)
"""

CONFIG = """
import sys

from agent_health import define_config

config = define_config(
    agents=[{{"key": "daemonic", "connector": "subprocess",
              "settings": {{"command": [sys.executable, "agent.py"], "timeout_s": {timeout}}},
              "versions": {{"v1": {{}}}}}}],
    default_agent="daemonic@v1",
)
"""


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for init to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the tag is read from /proc")
@pytest.mark.parametrize("hangs", [False, True], ids=["agent exits", "agent times out"])
def test_a_daemon_an_agent_started_does_not_outlive_the_run(tmp_path, evals, hangs):
    pid_file = tmp_path / "daemon.pid"
    (tmp_path / "agent.py").write_text(textwrap.dedent(AGENT.format(pid_file=str(pid_file), hangs=hangs)))
    (tmp_path / "agent_health_config.py").write_text(textwrap.dedent(CONFIG.format(timeout=3 if hangs else 60)))
    evals("smoke.yaml", "tests:\n  - name: outage\n    prompt: Diagnose why the payment service is failing.\n")
    try:
        proc = cli("run", "evals", "--no-judge", "--no-store", cwd=tmp_path)
        assert proc.returncode == (1 if hangs else 0), proc.stdout + proc.stderr
        assert ("timed out after 3s" in proc.stdout) == hangs, proc.stdout
        pid = int(pid_file.read_text())
        deadline = time.monotonic() + 10  # SIGKILL was sent before the run ended; the kernel is quick
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid), f"the agent's daemon {pid} outlived the run"
    finally:
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
