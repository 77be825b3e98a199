"""SIGTERM at the end of a run, just after the last result is logged (it used to leave no
report.json, a truncated temporary file, and once a process hung with its manifest at `running`):
at any moment it leaves every report complete and parseable, no temporary file, a manifest that
is not `running`, and a prompt exit whose code matches the manifest."""

from __future__ import annotations

import json
import os
import signal
import time
import xml.etree.ElementTree as ET

import pytest

from tests.faults.lifecycle import budget, finish, manifests, start, wait_until

TESTS = 20
QUICK = f"""
from agent_health import expect, test

for i in range({TESTS}):
    @test(f"quick {{i}}")
    async def quick():
        expect(1).to_equal(1)
"""


def _logged(tmp_path) -> int:
    logs = list((tmp_path / ".agent_health" / "results" / "_runs").glob("*/results.jsonl"))
    return sum(1 for line in logs[0].read_bytes().splitlines() if line.strip()) if logs else 0


@pytest.mark.parametrize("delay_ms", [0, 1, 3, 10, 30])
def test_sigterm_just_after_the_last_result_leaves_complete_reports_or_an_interrupted_manifest(
    delay_ms, evals, tmp_path
):
    evals("quick.eval.py", QUICK)
    reports = ["--reporter", "json=r.json", "--reporter", "junit=r.xml", "--reporter", "html=r.html"]
    proc = start("run", "evals", *reports, cwd=tmp_path)
    wait_until(lambda: _logged(tmp_path) == TESTS, budget(30), every_s=0.0005)
    time.sleep(delay_ms / 1000)
    os.kill(proc.pid, signal.SIGTERM)
    rc, _, err = finish(proc, budget(5))
    assert "Traceback" not in err, err
    (run,) = manifests(tmp_path)
    assert run["status"] in ("finished", "interrupted")
    assert rc == (143 if run["status"] == "interrupted" else 0), err
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # nothing half-written
    written = [name for name in ("r.json", "r.xml", "r.html") if (tmp_path / name).exists()]
    if not written:  # none at all: only when the run says it was interrupted
        assert run["status"] == "interrupted"
        return
    assert written == ["r.json", "r.xml", "r.html"]  # all or none
    assert len(json.loads((tmp_path / "r.json").read_text())["results"]) == TESTS
    assert len(ET.parse(tmp_path / "r.xml").getroot().findall(".//testcase")) == TESTS
    assert (tmp_path / "r.html").read_text().rstrip().endswith("</html>")
