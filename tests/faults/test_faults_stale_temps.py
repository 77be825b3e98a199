"""A run killed with SIGKILL while writing `--reporter json=FILE` (or the html page) left
`.FILE.PID.tmp` beside the report for good (1 MB for a 300-test run). The next run writing the
same report removes the temporary files whose writer is gone, and never one still being written
(its writer holds a lock on it until the report replaces FILE)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from tests.faults.conftest import cli
from tests.faults.lifecycle import budget, finish, start, wait_until

WAITING = """
import time
from pathlib import Path
from agent_health import test

for i in range(3):
    @test(f"waits {i}")
    def waits():
        Path("started").touch()
        for _ in range(600):  # until the test says so (60 s at most)
            if Path("release").exists():
                return
            time.sleep(0.1)
"""

QUICK = "from agent_health import test\n\n@test('quick')\ndef quick():\n    pass\n"


def _temps(folder, name: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(f".{name}.") and p.name.endswith(".tmp"))


def _age(folder, names: list[str]) -> None:
    """As if the next run came a minute later (a temporary file is only stale past a moment)."""
    old = time.time() - 60
    for name in names:
        os.utime(folder / name, (old, old))


@pytest.mark.parametrize("reporter", ["json", "html"])
def test_the_next_run_removes_what_a_killed_run_left_beside_the_report(reporter, evals, tmp_path):
    name = f"r.{reporter}"
    (tmp_path / "slow").mkdir()
    (tmp_path / "slow" / "waits.eval.py").write_text(WAITING)
    # json streams into its temporary file from the start, so the kill lands while it is written;
    # the html page is written in a moment at the end, which a kill cannot be timed to hit, so
    # that case puts there what such a kill leaves: a half page under a name no process locks
    proc = start("run", "slow", "--reporter", f"{reporter}={name}", cwd=tmp_path)
    wait_until((tmp_path / "started").exists, budget(20))
    if reporter == "html":
        (tmp_path / f".{name}.0123abcd{proc.pid}-0.tmp").write_text("<html><body>half a page")
    wait_until(lambda: bool(_temps(tmp_path, name)), budget(10))
    os.kill(proc.pid, signal.SIGKILL)
    finish(proc, budget(10))
    left = _temps(tmp_path, name)
    assert left and not (tmp_path / name).exists()
    _age(tmp_path, left)

    evals("quick.eval.py", QUICK)
    p = cli("run", "evals", "--reporter", f"{reporter}={name}", cwd=tmp_path, timeout=budget(30))
    assert p.returncode == 0, p.stdout + p.stderr
    assert _temps(tmp_path, name) == []
    assert (tmp_path / name).is_file()


def test_a_temporary_file_still_being_written_is_kept(evals, tmp_path):
    (tmp_path / "slow").mkdir()
    (tmp_path / "slow" / "waits.eval.py").write_text(WAITING)
    first = start("run", "slow", "--reporter", "json=r.json", cwd=tmp_path)
    wait_until((tmp_path / "started").exists, budget(20))
    wait_until(lambda: bool(_temps(tmp_path, "r.json")), budget(10))
    live = _temps(tmp_path, "r.json")
    _age(tmp_path, live)  # old enough: only its writer's lock keeps it

    evals("quick.eval.py", QUICK)
    p = cli("run", "evals", "--reporter", "json=r.json", cwd=tmp_path, timeout=budget(30))
    assert p.returncode == 0, p.stdout + p.stderr
    assert _temps(tmp_path, "r.json") == live  # the first run's file is still there

    (tmp_path / "release").touch()
    rc, _, err = finish(first, budget(30))
    assert rc == 0, err
    report = json.loads((tmp_path / "r.json").read_text())  # the first run replaced FILE at its end
    assert {r["name"] for r in report["results"]} == {"waits 0", "waits 1", "waits 2"}
    assert _temps(tmp_path, "r.json") == []
