"""Nothing a test does can hang the process: a catastrophic regular expression on the event loop
(which holds the interpreter lock and starved the watchdog thread), a non-daemon thread left
running, a body that sends SIGTERM to its own process, and thousands of epochs on an agent that
never awaits. Each keeps the promise of docs/cli.md: the process exits within a few seconds of the
timeout or the signal, with the results it has, the tests cut short reported errored with the
reason, and memory stays flat in the number of trials."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import time
import tracemalloc
from pathlib import Path

from tests.faults.lifecycle import budget, finish, jsonl_results, manifests, start, wait_until

REGEX = """
import re
from pathlib import Path
from agent_health import expect, test

@test("catastrophic", timeout={timeout})
async def catastrophic():
    Path("started").touch()
    re.match(r"(a+)+$", "a" * 40 + "b")

@test("fine")
async def fine():
    expect(1).to_equal(1)
"""


def test_a_catastrophic_regex_on_the_loop_fails_at_its_timeout(evals, tmp_path):
    evals("regex.eval.py", REGEX.format(timeout=1))
    proc = start("run", "evals", "--reporter", "jsonl=r.jsonl", cwd=tmp_path)
    rc, _, err = finish(proc, budget(1 + 2))  # the timeout, then the watchdog's grace
    assert rc == 1, err
    results = jsonl_results(tmp_path / "r.jsonl")
    assert results["catastrophic"]["status"] == "failed"
    assert "blocked the event loop" in results["catastrophic"]["error"]
    assert 're.match(r"(a+)+$", "a" * 40 + "b")' in results["catastrophic"]["error"]  # the blocking line
    assert results["fine"]["status"] == "passed"


def test_sigterm_during_a_catastrophic_regex_ends_the_run_at_once(evals, tmp_path):
    evals("regex.eval.py", REGEX.format(timeout=600))
    proc = start("run", "evals", "--reporter", "jsonl=r.jsonl", cwd=tmp_path)
    wait_until((tmp_path / "started").exists, budget(20))
    os.kill(proc.pid, signal.SIGTERM)
    rc, _, err = finish(proc, budget(5))
    assert rc == 143, err
    assert "Traceback" not in err
    result = jsonl_results(tmp_path / "r.jsonl")["catastrophic"]
    assert result["status"] == "errored" and "SIGTERM" in result["error"]
    (run,) = manifests(tmp_path)
    assert run["status"] == "interrupted"


C_LOOP = """
from agent_health import test

@test("computes in C", timeout=1)
async def computes():
    sum(range(10**12))  # holds the interpreter lock and never checks for signals
"""


def test_code_that_never_lets_go_of_the_interpreter_still_ends_the_process(evals, tmp_path):
    """Nothing in Python can run meanwhile, not even a signal handler: the last-resort exit
    (faulthandler, armed by the loop) prints the stacks and exits a few seconds past the timeout."""
    evals("c_loop.eval.py", C_LOOP)
    proc = start("run", "evals", cwd=tmp_path)
    rc, _, err = finish(proc, budget(1 + 2 + 5 + 1))  # timeout, grace, backstop, re-arming period
    assert rc == 1
    assert "c_loop.eval.py" in err and "computes" in err  # the blocking test's frame in the dump
    (run,) = manifests(tmp_path)
    assert run["status"] == "running"  # nothing could be written; the results before it would be


SLOW_TEARDOWN = """
import asyncio, time
from pathlib import Path
from agent_health import fixture, test

@fixture
def slow_to_clean():
    yield
    time.sleep(60)  # a teardown that outlives any patience

@test("cleans up slowly")
async def cleans(slow_to_clean):
    Path("started").touch()
    await asyncio.sleep(60)
"""


def test_a_run_that_does_not_stop_after_sigterm_is_abandoned_within_seconds(evals, tmp_path):
    evals("teardown.eval.py", SLOW_TEARDOWN)
    proc = start("run", "evals", "--reporter", "jsonl=r.jsonl", cwd=tmp_path)
    wait_until((tmp_path / "started").exists, budget(20))
    os.kill(proc.pid, signal.SIGTERM)
    rc, _, err = finish(proc, budget(5 + 2))  # the stop deadline, then the abandoning
    assert rc == 143, err
    assert "did not stop within 5s" in err and "Traceback" not in err
    result = jsonl_results(tmp_path / "r.jsonl")["cleans up slowly"]
    assert result["status"] == "errored" and "SIGTERM" in result["error"]
    (run,) = manifests(tmp_path)
    assert run["status"] == "interrupted"


def test_a_second_sigterm_exits_at_once(evals, tmp_path):
    evals("teardown.eval.py", SLOW_TEARDOWN)
    proc = start("run", "evals", "--reporter", "jsonl=r.jsonl", cwd=tmp_path)
    wait_until((tmp_path / "started").exists, budget(20))
    os.kill(proc.pid, signal.SIGTERM)
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGTERM)
    rc, _, err = finish(proc, budget(2))
    assert rc == 143, err
    (run,) = manifests(tmp_path)
    assert run["status"] == "interrupted"


THREAD = """
import threading, time
from agent_health import test

@test("starts a thread")
async def starts():
    threading.Thread(target=time.sleep, args=(3600,), name="left-behind").start()

@test("fine")
async def fine():
    pass
"""


def test_a_non_daemon_thread_left_by_a_body_does_not_keep_the_process_alive(evals, tmp_path):
    evals("thread.eval.py", THREAD)
    proc = start("run", "evals", "--reporter", "jsonl=r.jsonl", cwd=tmp_path)
    rc, out, err = finish(proc, budget(2 + 2))  # the threads' grace, then exit
    assert rc == 0, err  # both passed: the exit code is the run's
    assert "left-behind" in err and "exiting without waiting" in err and "Traceback" not in err
    assert "agent-health results" in out  # the summary was printed before
    assert {r["status"] for r in jsonl_results(tmp_path / "r.jsonl").values()} == {"passed"}
    (run,) = manifests(tmp_path)
    assert run["status"] == "finished"


SELF_TERM = """
import os, signal, time
from agent_health import test

@test("terminates its own process")
async def term():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.5)

@test("fine")
async def fine():
    pass
"""


def test_a_body_sending_sigterm_to_its_own_process_ends_the_run_cleanly(evals, tmp_path):
    evals("term.eval.py", SELF_TERM)
    proc = start("run", "evals", "--reporter", "json=r.json", "--reporter", "junit=r.xml", cwd=tmp_path)
    rc, _, err = finish(proc, budget(5))  # it used to hang until a second SIGTERM
    assert rc == 143, err
    assert "Traceback" not in err and "InvalidStateError" not in err
    import json

    report = json.loads((tmp_path / "r.json").read_text())  # complete, not a torn temporary file
    assert {r["name"] for r in report["results"]} == {"terminates its own process", "fine"}
    assert not list(tmp_path.glob(".r.*"))
    (run,) = manifests(tmp_path)
    assert run["status"] == "interrupted"


EPOCHS = """
from pathlib import Path
from agent_health import test

@test("many trials", prompt="Diagnose why the payment service is failing.", epochs={epochs})
async def many(agent, test_info):
    if test_info.epoch == 1:
        Path("started").touch()
    await agent.run()

for n in range({more}):  # more tests of as many trials: the run's planned work, past the epochs bound
    @test(f"more trials {{n}}", prompt="Why is checkout slow?", epochs={epochs})
    async def more(agent):
        await agent.run()
"""


def test_sigterm_is_honoured_during_thousands_of_epochs_of_an_agent_that_never_awaits(evals, tmp_path):
    # minutes of trials that never yield: 1,000 epochs (the bound, docs/limits.md) x 200 tests
    evals("epochs.eval.py", EPOCHS.format(epochs=1_000, more=199))
    proc = start("run", "evals", "--reporter", "jsonl=r.jsonl", "--concurrency", "1", "--allow-large-run", cwd=tmp_path)
    wait_until((tmp_path / "started").exists, budget(20))  # trials are running
    os.kill(proc.pid, signal.SIGTERM)
    rc, _, err = finish(proc, budget(5))
    assert rc == 143, err
    result = jsonl_results(tmp_path / "r.jsonl")["many trials"]
    assert result["status"] == "errored" and "did not finish: SIGTERM received" in result["error"]


QUIET_EPOCHS = """
from agent_health import test

@test("many trials", prompt="Diagnose why the payment service is failing.", epochs={epochs})
async def many(agent):
    await agent.run()
"""


def _peak_growth(tmp_path: Path, epochs: int) -> int:
    """Bytes allocated by one run of a test with `epochs` trials, at its peak."""
    from agent_health import build_settings, load_config, load_tests, run_evaluation

    folder = tmp_path / f"e{epochs}"
    folder.mkdir()
    (folder / "epochs.eval.py").write_text(QUIET_EPOCHS.format(epochs=epochs))
    (folder / "agent_health_config.py").write_text(
        "from agent_health import define_config\nconfig = define_config(traces={'source': 'none'})\n"
    )
    config = load_config(str(folder / "agent_health_config.py"))
    tests = load_tests([folder]).tests
    settings = build_settings(config, {"store": "none"})
    asyncio.run(run_evaluation(tests, config, settings))  # warm: imports and caches
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        asyncio.run(run_evaluation(tests, config, settings))
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_memory_stays_flat_in_the_number_of_trials(tmp_path):
    """Each trial used to stay in memory with its agent run and signals until the test ended
    (about 19 kB a trial on the demo agent: 11 GB at 100,000 epochs). Now a result keeps the first
    32 trials and counts the others: 2,400 more trials cost next to nothing."""
    small, large = _peak_growth(tmp_path, 600), _peak_growth(tmp_path, 3000)
    per_trial = (large - small) / 2400
    assert per_trial < 200, f"{per_trial:.0f} bytes per extra trial"
