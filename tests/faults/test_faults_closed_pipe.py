"""`agent-health run ... | head -1` hung for good and lost results: once `head` had its line and
closed the pipe, rich raised `SystemExit` on the broken pipe, the result sink's thread (which
caught only `Exception`) died, and the loop waited for it until SIGTERM: 9 of 15 results stored,
the manifest `running`. Now a closed stdout ends reporting to stdout and nothing else: every
result is stored, the manifest is finished, and the process exits at once with 141 (128 +
SIGPIPE, what the shell reports for a writer ended by a closed pipe)."""

from __future__ import annotations

import pytest

from agent_health.stores import LocalResultStore
from tests.faults.lifecycle import budget, finish, manifests, start

# one test fails at once; the others wait until the test has closed the pipe, then fail, so
# every line the summary prints for them meets the closed pipe
EVALS = """
import time
from pathlib import Path
from agent_health import test

@test("first")
def first():
    assert False, "printed while the pipe is open"

for i in range(14):
    @test(f"after the pipe closed {i}")
    def after():
        for _ in range(600):  # 60 s at most
            if Path("closed").exists():
                break
            time.sleep(0.1)
        assert False, "printed to a closed pipe"
"""

EXIT_CLOSED_PIPE = 141


@pytest.mark.parametrize("reporter", ["summary", "jsonl", "json"])
def test_a_closed_stdout_ends_reporting_there_and_the_run_finishes(evals, tmp_path, reporter):
    evals("many.eval.py", EVALS)
    proc = start("run", "evals", "--reporter", reporter, "--concurrency", "4", cwd=tmp_path)
    assert proc.stdout is not None
    assert proc.stdout.readline()  # `head -1`: one line, then the pipe is closed
    proc.stdout.close()
    (tmp_path / "closed").touch()
    rc, _, err = finish(proc, budget(5))
    assert rc == EXIT_CLOSED_PIPE, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    (run,) = manifests(tmp_path)
    assert run["status"] == "finished", err
    stored = list(LocalResultStore(tmp_path / ".agent_health" / "results").run_results(run["id"]))
    assert len(stored) == 15
    assert "stdout was closed" in err  # said once, on stderr
    assert err.count("stdout was closed") == 1


def test_stdout_and_stderr_on_one_closed_pipe_still_end_cleanly(evals, tmp_path):
    """`agent-health run 2>&1 | head -1`: stderr is the same closed pipe, so the messages the CLI
    writes there at the end (the results stored, the errors) must not fail either."""
    import os
    import subprocess
    import sys

    from tests.faults.conftest import process_env

    evals("many.eval.py", EVALS)
    read, write = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_health", "run", "evals", "--concurrency", "4"],
        cwd=tmp_path,
        env=process_env(),
        stdout=write,
        stderr=write,
    )
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        assert pipe.readline()
    (tmp_path / "closed").touch()
    try:
        rc = proc.wait(budget(5))
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the process did not exit") from None
    assert rc == EXIT_CLOSED_PIPE
    (run,) = manifests(tmp_path)
    assert run["status"] == "finished"
    assert len(list(LocalResultStore(tmp_path / ".agent_health" / "results").run_results(run["id"]))) == 15


REPORTER_EXITS = """
import asyncio
from agent_health import build_settings, load_config, load_tests, run_evaluation
from agent_health.reporters import Reporter

class Exits(Reporter):
    name = "exits"

    def result(self, result):
        raise SystemExit(3)  # a plugin's sys.exit(), or rich's answer to a broken pipe

config = load_config()
tests = load_tests(["evals"]).tests
outcome = asyncio.run(run_evaluation(tests, config, build_settings(config, {}), reporters=[Exits()]))
print(outcome.run.status, outcome.stored, "|".join(outcome.output_errors))
"""


def test_a_reporter_raising_system_exit_is_dropped_and_the_run_finishes(evals, tmp_path):
    """The thread that calls the reporters caught only `Exception`: a `SystemExit` ended it and
    the run waited for it for good."""
    from tests.faults.conftest import python

    evals("many.eval.py", EVALS)
    (tmp_path / "closed").touch()  # the tests need not wait
    done = python(REPORTER_EXITS, cwd=tmp_path, timeout=budget(10))
    assert done.returncode == 0, done.stderr
    status, stored, errors = done.stdout.strip().split(" ", 2)
    assert (status, stored) == ("finished", "15")
    assert errors == "reporter exits: SystemExit: 3; its report is incomplete (results are still stored)"
