"""A damaged line in a run's results.jsonl used to be skipped silently: `report RUN` wrote a page
of 3 of 10 results and exited 0. Now the page holds every readable result, the message names the
skipped lines, and the exit code is 2. Only the torn last line a killed writer leaves (no newline
after it: its batch was never stored) is skipped without a word."""

from __future__ import annotations

import json

import pytest

from tests.faults.lifecycle import budget, manifests
from tests.support.cli import cli_in_process

TEN = """
from agent_health import expect, test

for i in range(10):
    @test(f"t{i}")
    def t():
        expect(1).to_equal(1)
"""


def _stored_run(evals, tmp_path):
    evals("ten.eval.py", TEN)
    p = cli_in_process("run", "evals", cwd=tmp_path, timeout=budget(30))
    assert p.returncode == 0, p.stdout + p.stderr
    (run,) = manifests(tmp_path)
    log = tmp_path / ".agent_health" / "results" / "_runs" / run["id"] / "results.jsonl"
    return run["id"], log


DAMAGE = {
    "bytes garbled": lambda line: line[:40] + b"\x00garbled" + line[60:],
    "not a result": lambda line: b'{"hello": "world"}\n',
    "a result missing fields": lambda line: (
        json.dumps({k: v for k, v in json.loads(line).items() if k != "status"}).encode() + b"\n"
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_line_is_named_and_the_report_exits_2(damage, evals, tmp_path):
    run_id, log = _stored_run(evals, tmp_path)
    lines = log.read_bytes().splitlines(keepends=True)
    assert len(lines) == 10
    lines[3] = DAMAGE[damage](lines[3])
    lines[6] = DAMAGE[damage](lines[6])
    log.write_bytes(b"".join(lines))
    p = cli_in_process("report", run_id, "-o", "r.html", cwd=tmp_path, timeout=budget(30))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    assert f"results.jsonl of run {run_id}: skipped line(s) 4, 7, not valid results" in p.stderr
    assert "8 test result(s)" in p.stdout  # the page holds every readable result
    assert (tmp_path / "r.html").is_file()


def test_the_torn_last_line_of_a_killed_writer_is_skipped_silently(evals, tmp_path):
    run_id, log = _stored_run(evals, tmp_path)
    data = log.read_bytes()
    log.write_bytes(data + data.splitlines()[0][:50])  # a batch cut short by a kill: no newline
    p = cli_in_process("report", run_id, "-o", "r.html", cwd=tmp_path, timeout=budget(30))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "10 test result(s)" in p.stdout
