"""pytest plugin: no test leaves a process behind.

At the start of the session every process the tests start inherits a marker in its environment
(`AGENT_HEALTH_TEST_SESSION`, unique to this session). When the session ends, after the
session-wide services (OpenSearch, PostgreSQL, ...) were stopped by their fixtures, any process
still running that carries the marker or descends from this process is a leftover: after a
grace period for processes that are still exiting, the session fails, naming each one (pid and
command line), and they are stopped (SIGTERM, then SIGKILL). Linux only (it reads /proc).

On parallel workers (pytest-xdist) the controller sets the marker before it starts the workers,
which inherit it, and checks once they have all ended (their processes are below it too)."""

from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

MARKER = "AGENT_HEALTH_TEST_SESSION"
# processes still exiting when the session ends get this long (the variable: for the check's own tests)
GRACE_S = float(os.environ.get("AGENT_HEALTH_LEFTOVER_GRACE_S", "10"))
_PROC = Path("/proc")


@dataclass(frozen=True)
class Leftover:
    pid: int
    command: str


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None when it is gone."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return fields[0], int(fields[1])


def _marked(pid: int, marker: bytes) -> bool:
    try:
        return marker in (_PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _command(pid: int) -> str:
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:200] or "?"


def leftovers(session_id: str, me: int) -> list[Leftover]:
    """Live processes (not zombies) of this session: marked with `session_id` or below `me`."""
    marker = f"{MARKER}={session_id}".encode()
    parents: dict[int, int] = {}
    states: dict[int, str] = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            states[int(entry.name)], parents[int(entry.name)] = st

    def below_me(pid: int) -> bool:
        seen = set()
        while pid > 1 and pid not in seen:
            seen.add(pid)
            pid = parents.get(pid, 0)
            if pid == me:
                return True
        return False

    found = [
        pid for pid, state in states.items() if pid != me and state != "Z" and (below_me(pid) or _marked(pid, marker))
    ]
    return [Leftover(pid, _command(pid)) for pid in sorted(found)]


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def _stop(pids: list[int]) -> None:
    """SIGTERM each, then SIGKILL what is still running 5 s later."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        until = time.monotonic() + 5
        while time.monotonic() < until and any(_alive(p) for p in pids):
            time.sleep(0.1)


_SESSION = pytest.StashKey[str]()


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if not _PROC.is_dir():
        return
    if _is_xdist_worker(config):
        # A worker of a parallel run keeps the marker it inherited from the controller, which checks
        # the whole session once every worker (and its services) has ended; a worker cannot check
        # alone while the others still run their processes.
        return
    config.stash[_SESSION] = os.environ[MARKER] = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"


@pytest.hookimpl(trylast=True)  # after the runner tore the session fixtures (the services) down
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session_id = session.config.stash.get(_SESSION, None)
    if session_id is None:
        return
    me = os.getpid()
    until = time.monotonic() + GRACE_S
    found = leftovers(session_id, me)
    while found and time.monotonic() < until:
        time.sleep(0.2)
        found = leftovers(session_id, me)
    if not found:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"{len(found)} process(es) left behind by the tests (stopped now):"]
    lines += [f"  pid {p.pid}: {p.command}" for p in found]
    if reporter is not None:
        reporter.write_sep("=", "processes left behind", red=True)
        for line in lines:
            reporter.write_line(line)
    else:
        print("\n".join(lines))
    _stop([p.pid for p in found])
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
