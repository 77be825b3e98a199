"""Reports and result files are created with the user's umask (mkstemp alone makes them 0600)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from tests.faults.conftest import cli, python

EVAL = """
tests:
  - name: quick answer
    prompt: Diagnose why the payment service is failing.
"""

STORE = """
from agent_health import TestResult
from agent_health.model import EvalRun
from agent_health.stores import LocalResultStore

store = LocalResultStore("results")
run = EvalRun(id="run-1", transport="cli", agents=("demo@v1",))
store.put_run(run)
store.put(TestResult(test_id="s::t", name="t", suite="s", source_file="s.yaml", agent="demo@v1",
                     status="passed", eval_run_id="run-1"))
"""


def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002], ids=oct)
def test_reports_and_results_follow_the_umask(tmp_path, evals, umask):
    evals("smoke.yaml", EVAL)
    proc = cli(
        "run", "evals", "--agent", "demo@v2", "--no-judge", "--reporter", "json=out/report.json",
        "--reporter", "junit=out/report.xml", cwd=tmp_path, umask=umask,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    store = python(STORE, cwd=tmp_path, umask=umask)
    assert store.returncode == 0, store.stderr
    expected = 0o666 & ~umask
    reports = modes(tmp_path / "out")
    results = modes(tmp_path / "results")
    assert set(reports) == {"report.json", "report.xml"}
    assert len(results) >= 2  # the result file and the run manifest at least
    assert {name: oct(m) for name, m in {**reports, **results}.items()} == {
        name: oct(expected) for name in {**reports, **results}
    }


def test_a_device_is_written_in_place_and_never_replaced(tmp_path):
    from agent_health.files import write_atomic

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write_atomic(fifo, "through the pipe")  # a report path can be a FIFO or /dev/stdout
    reader.join(timeout=10)
    assert got == [b"through the pipe"] and stat.S_ISFIFO(fifo.stat().st_mode)  # still the FIFO
    write_atomic(Path("/dev/null"), "x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_symbolic_link_is_followed_and_stays_a_link(tmp_path):
    from agent_health.files import write_atomic

    (tmp_path / "real.html").write_text("old")
    (tmp_path / "latest.html").symlink_to("real.html")
    write_atomic(tmp_path / "latest.html", "new")
    assert (tmp_path / "latest.html").is_symlink() and (tmp_path / "real.html").read_text() == "new"
