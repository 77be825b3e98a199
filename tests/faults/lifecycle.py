"""Helpers of the run-lifecycle fault tests: the CLI as a process the test can signal, the run's
stored manifest, and a time budget that scales with this machine.

A limit on how long the process may take is `budget(fixed)`: the seconds the behaviour itself
needs (a timeout, the stop deadline) plus a few times what a one-test CLI run takes here, so a
busy machine stretches the limit instead of failing a correct change; so does the machine's load at
the time of the limit (tests/support/timing.py `load_factor`)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.faults.conftest import process_env
from tests.support.timing import load_factor

ONE_TEST = "from agent_health import test\n\n@test('t')\ndef t():\n    pass\n"


@functools.cache
def cli_start_s() -> float:
    """Wall time of a one-test `agent-health run` on this machine (best of 2)."""
    import tempfile

    best = float("inf")
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "one.eval.py").write_text(ONE_TEST)
        for _ in range(2):
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "agent_health", "run", "one.eval.py", "--no-store"],
                cwd=folder,
                env=process_env(),
                capture_output=True,
                timeout=120,
            )
            best = min(best, time.perf_counter() - t0)
    return best


def budget(fixed_s: float) -> float:
    """`fixed_s` plus four one-test CLI runs of this machine, stretched by the machine's load now
    (the CLI run is timed once per session; parallel workers can load the machine several times
    over later)."""
    return (fixed_s + 4 * cli_start_s()) * load_factor()


def start(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`agent-health ARGS` started in its own process, its output captured."""
    return subprocess.Popen(
        [sys.executable, "-m", "agent_health", *args],
        cwd=cwd,
        env=process_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="backslashreplace",
    )


def finish(proc: subprocess.Popen[str], within_s: float) -> tuple[int, str, str]:
    """Wait for `proc` at most `within_s` (killed past it: the test then fails on the hang);
    its exit code, stdout and stderr."""
    try:
        out, err = proc.communicate(timeout=within_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the process did not exit within {within_s:.1f}s\n{out[-2000:]}\n{err[-3000:]}") from None
    return proc.returncode, out, err


def wait_until(predicate: Any, within_s: float, every_s: float = 0.01) -> None:
    until = time.monotonic() + within_s
    while not predicate():
        if time.monotonic() > until:
            raise AssertionError(f"still not true after {within_s:.1f}s: {predicate}")
        time.sleep(every_s)


def manifests(root: Path) -> list[dict[str, Any]]:
    """Every run manifest of the local store under `root` (the project folder)."""
    return [json.loads(p.read_text()) for p in (root / ".agent_health" / "results" / "_runs").glob("*/run.json")]


def jsonl_results(path: Path) -> dict[str, dict[str, Any]]:
    """name -> result of a `--reporter jsonl` file (its summary line left out)."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {line["name"]: line for line in lines if "test_id" in line}
