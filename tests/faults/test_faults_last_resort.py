"""The CLI killed itself about 8 s into a long blocking step, whatever the test's timeout: the
last-resort exit (faulthandler, for code that never lets go of the interpreter) was armed from the
deadlines of the tests in flight only when the loop next beat, so a test that held the interpreter
from its start (a sync body in one long C call, a python agent allocating gigabytes) met the exit
armed for a run with no test in flight: exit 1 with a thread dump, no result, no report, the
manifest `running`. Its own scrubbing of a 191 MB result blocked the loop the same way.

Now a test runs to its own timeout: the exit is armed past a trial's deadline the moment it is
watched, and fires only past the latest deadline the run has set (plus the grace); with nothing
in flight it is not armed. Scrubbing a large result runs in a worker thread, window by window, and
never stops the loop.

The CLI's grace before the last resort (8 s past a deadline) is scaled down to 1 s here, so that
a block of 3 s shows within seconds whether the exit fires before the test's 30 s deadline."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.faults.conftest import process_env, python
from tests.faults.lifecycle import budget, finish, jsonl_results, manifests

# The CLI with the last resort's waits scaled down: the grace, the backstop and the re-arming
# period (the Watchdog's own names, today's and before the fix) make 1 s instead of 8 s.
SCALED_CLI = """
import agent_health.engine.watchdog as watchdog
watchdog.Watchdog.__init__.__kwdefaults__.update(grace_s=0.25, backstop_s=0.5)
watchdog._REARM_BACKSTOP_S = 0.25
from agent_health.cli.main import main
main()
"""

# libc's sleep() called with the interpreter lock held: nothing else in the process runs meanwhile,
# as in one long C computation, but for a known time whatever the machine's load
HOLD = "ctypes.PyDLL(None).sleep({s})"

BODIES = {
    "a sync body": """
        import ctypes
        from agent_health import test

        @test("holds the interpreter", timeout=30)
        def holds():
            {hold}
        """,
    "an async body": """
        import ctypes
        from agent_health import test

        @test("holds the interpreter", timeout=30)
        async def holds():
            {hold}
        """,
    "a python agent": """
        from agent_health import expect, test

        @test("holds the interpreter", prompt="Why is checkout slow?", timeout=30)
        async def holds(agent):
            result = await agent.run()
            expect(result.output).to_contain("held")
        """,
}

AGENT = """
import ctypes

def answer(prompt):
    {hold}
    return {{"output": "held the interpreter"}}
"""

AGENT_CONFIG = """
from agent_health import define_config

config = define_config(agents=[{
    "key": "py", "connector": "python", "settings": {"function": "agent:answer", "timeout_s": 30},
    "versions": {"v1": {}},
}], default_agent="py@v1")
"""


def scaled_run(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SCALED_CLI, "run", *args],
        cwd=tmp_path,
        env=process_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="backslashreplace",
    )


@pytest.mark.parametrize("where", list(BODIES))
def test_a_test_holding_the_interpreter_from_its_start_runs_to_its_own_timeout(evals, tmp_path, where):
    evals("hold.eval.py", textwrap.dedent(BODIES[where]).format(hold=HOLD.format(s=3)))
    if where == "a python agent":
        (tmp_path / "agent.py").write_text(AGENT.format(hold=HOLD.format(s=3)))
        (tmp_path / "agent_health_config.py").write_text(AGENT_CONFIG)
    proc = scaled_run(tmp_path, "evals", "--reporter", "jsonl=r.jsonl")
    rc, _, err = finish(proc, budget(3))
    assert rc == 0, err[-3000:]  # not the last resort's exit 1
    assert "Timeout (" not in err and "most recent call first" not in err  # no thread dump
    assert jsonl_results(tmp_path / "r.jsonl")["holds the interpreter"]["status"] == "passed"
    (run,) = manifests(tmp_path)
    assert run["status"] == "finished"


ABANDONED = """
import asyncio, ctypes, time
from agent_health import before_all, describe, test

@test("left running", timeout=1)
def left():
    time.sleep(1.5)  # past the timeout: abandoned, still running
    ctypes.PyDLL(None).sleep(600)  # then holds the interpreter for good

with describe("later"):
    @before_all
    async def prepare():  # the run goes on, with no test in flight (a hook has no deadline)
        await asyncio.sleep(60)

    @test("next")
    def next_one():
        pass
"""


def test_code_abandoned_at_its_timeout_that_then_holds_the_interpreter_still_ends_the_process(evals, tmp_path):
    """No deadline is ahead while the hook waits, yet the abandoned body holds the interpreter for
    good: the exit then fires a grace past the loop's last beat, instead of never."""
    evals("abandoned.eval.py", ABANDONED)
    proc = scaled_run(tmp_path, "evals", "--concurrency", "1")
    rc, _, err = finish(proc, budget(1.5 + 1))
    assert rc == 1, err[-3000:]
    assert "abandoned.eval.py" in err and "in left" in err  # the holding frame, in the thread dump


# a python agent answering with 24 files of 1 MB, each ending with the agent's token (a secret
# resolved from the environment, so the run scrubs it from everything it keeps)
BIG_AGENT = """
from agent_health import RunResult
from agent_health.model import Artifact

def answer(prompt, run_id, token):
    body = "x" * ((1 << 20) - 100) + " token " + token
    files = tuple(Artifact(name=f"f{i}.txt", media_type="text/plain", size=len(body), content=body, encoding="utf-8")
                  for i in range(24))
    return RunResult(output="wrote 24 files", run_id=run_id, artifacts=files)
"""

BIG_CONFIG = """
from agent_health import define_config

config = define_config(agents=[{
    "key": "py", "connector": "python",
    "settings": {"function": "agent:answer", "kwargs": {"token": {"env": "AGENT_TOKEN"}}},
    "versions": {"v1": {}},
}], default_agent="py@v1", traces={"source": "none"})
"""

BIG_EVALS = """
from agent_health import test

@test("writes files", prompt="Write the files.")
async def writes(agent):
    await agent.run()
"""

MEASURE = """
import asyncio, json
from agent_health import build_settings, load_config, load_tests, run_evaluation
from agent_health.reporters import CallbackReporter

async def main():
    config = load_config()
    tests = load_tests(["evals"]).tests
    results, gaps, done = [], [0.0], asyncio.Event()
    loop = asyncio.get_running_loop()

    async def beat():  # how long the loop went without running this task
        last = loop.time()
        while not done.is_set():
            await asyncio.sleep(0.01)
            gaps.append(loop.time() - last - 0.01)
            last = loop.time()

    task = asyncio.create_task(beat())
    settings = build_settings(config, {"store": "none"})
    await run_evaluation(tests, config, settings, reporters=[CallbackReporter(results.append)])
    done.set()
    await task
    (result,) = results
    print(json.dumps({"gap": max(gaps), "status": result.status, "error": result.error,
                      "files": len(result.run.artifacts), "json": result.model_dump_json()}))

asyncio.run(main())
"""


def test_scrubbing_a_large_result_never_stops_the_loop(evals, tmp_path):
    token = "tok-" + "9f3b2c71e4a85d06" * 2
    (tmp_path / "agent.py").write_text(BIG_AGENT)
    (tmp_path / "agent_health_config.py").write_text(BIG_CONFIG)
    evals("big.eval.py", BIG_EVALS)
    done = python(MEASURE, cwd=tmp_path, env={"AGENT_TOKEN": token}, timeout=budget(60))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == "passed" and out["files"] == 24, out["error"]
    assert token not in out["json"] and out["json"].count("[REDACTED]") >= 24  # scrubbed all the same
    # the scrubbing (seconds of CPU for 24 MB) ran window by window off the loop: the loop never
    # waited longer than a moment (before, it waited for all of it: about 2 s on a quiet machine)
    assert out["gap"] < 0.5, f"the event loop stopped for {out['gap']:.2f}s"
