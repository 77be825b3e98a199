"""The loop watchdog and the process's exit: an async body that blocks the loop past its timeout
fails naming the test and the call site, the other tests are not charged the blocked time, a sync
body that never returns is abandoned, and the CLI always exits within 5 s of the last timeout."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

from agent_health import RunSettings, load_config, load_tests, run_evaluation
from agent_health.reporters.base import CallbackReporter
from agent_health.stores import LocalResultStore, ResultKey
from tests.support.timing import scaled

from ..conftest import ROOT
from ..core.helpers import run_dir

BLOCKER = """
import asyncio, time
from agent_health import test

@test("blocker", timeout=1)
async def blocker():
    await asyncio.sleep(0.1)   # the others are in flight when the loop blocks
    time.sleep(3)

for i in range(4):
    @test(f"patient {i}", timeout=1)
    async def patient():
        await asyncio.sleep(0.6)
"""


def test_a_loop_blocking_body_fails_naming_itself_and_the_others_pass(write_eval, tmp_path):
    write_eval("b.eval.py", BLOCKER)
    t0 = time.perf_counter()
    res = run_dir(tmp_path / "evals", concurrency=8)
    wall = time.perf_counter() - t0
    blocker = res["blocker"]
    assert blocker.status == "failed"
    assert "test 'b::blocker' blocked the event loop" in blocker.error
    assert "b.eval.py:7 in blocker (time.sleep(3))" in blocker.error
    assert blocker.duration_ms < 2500  # interrupted at its timeout, not after the 3 s sleep
    for i in range(4):  # started before the block; their timeout moved by the blocked time
        assert res[f"patient {i}"].status == "passed", res[f"patient {i}"].error
    assert wall < 2.5


def test_without_an_interrupt_the_block_is_still_reported_failed(write_eval, tmp_path):
    """Off the main thread no signal can reach the loop: the body returns after its block, past
    its timeout, and is failed (it used to pass)."""
    write_eval(
        "b.eval.py",
        """
        import time
        from agent_health import test

        @test("sleeps in async", timeout=0.5)
        async def sleeps():
            time.sleep(1.2)
        """,
    )
    tests = load_tests([tmp_path / "evals"]).tests
    out: list = []

    def run() -> None:
        settings = RunSettings(agents=("demo@v2",), store=None)
        asyncio.run(run_evaluation(tests, load_config(), settings, reporters=[CallbackReporter(out.append)]))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    (r,) = out
    assert r.status == "failed" and r.signals[0].name == "timeout"
    assert "blocked the event loop for 1." in r.error and "(time.sleep(1.2))" in r.error


def test_an_unawaited_agent_run_is_errored(write_eval, tmp_path):
    write_eval(
        "u.eval.py",
        """
        from agent_health import test

        @test("forgot await", prompt="payment service failing")
        async def forgot(agent):
            agent.run()
        """,
    )
    r = run_dir(tmp_path / "evals")["forgot await"]
    assert r.status == "errored" and r.run is None
    assert "agent.run() was called but never awaited" in r.error


def _cli(tmp_path, body: str, *args: str) -> tuple[subprocess.CompletedProcess, float, list[dict]]:
    (tmp_path / "evals").mkdir(exist_ok=True)
    (tmp_path / "evals" / "hang.eval.py").write_text(body)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "agent_health", "run", "evals", "--timeout", "1", "--reporter", "jsonl=r.jsonl", *args],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    wall = time.perf_counter() - t0
    lines = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    return proc, wall, lines


SYNC_FOREVER = """
import threading
from agent_health import test

@test("never returns")
def never():
    threading.Event().wait()

@test("fine")
def fine():
    pass
"""


def test_cli_exits_after_a_sync_body_that_never_returns(tmp_path):
    proc, wall, lines = _cli(tmp_path, SYNC_FOREVER)
    assert proc.returncode == 1, proc.stderr
    assert wall < scaled(1 + 5), f"the CLI took {wall:.1f}s to exit (limit {scaled(1 + 5):.1f}s on this machine)"
    statuses = {line["name"]: line["status"] for line in lines if "test_id" in line}
    assert statuses == {"never returns": "failed", "fine": "passed"}
    assert "summaries" in lines[-1]


ASYNC_FOREVER = """
import time
from agent_health import test

@test("blocks forever")
async def forever():
    time.sleep(10**6)

@test("fine")
async def fine():
    pass
"""


def test_cli_exits_after_an_async_body_that_blocks_the_loop_forever(tmp_path):
    proc, wall, lines = _cli(tmp_path, ASYNC_FOREVER, "--concurrency", "1")
    assert proc.returncode == 1, proc.stderr
    assert wall < scaled(1 + 5), f"the CLI took {wall:.1f}s to exit (limit {scaled(1 + 5):.1f}s on this machine)"
    by_name = {line["name"]: line for line in lines if "test_id" in line}
    assert by_name["blocks forever"]["status"] == "failed" and by_name["fine"]["status"] == "passed"
    assert "(time.sleep(10**6))" in by_name["blocks forever"]["error"]


UNINTERRUPTIBLE = """
import signal, time
from agent_health import test

@test("fine")
async def fine():
    pass

@test("cannot be interrupted")
async def stuck():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})  # the watchdog's interrupt never arrives
    time.sleep(10**6)
"""


def test_cli_exits_when_a_blocked_loop_cannot_be_interrupted(tmp_path):
    proc, wall, lines = _cli(tmp_path, UNINTERRUPTIBLE, "--concurrency", "1")
    assert proc.returncode == 1
    assert wall < scaled(1 + 5), f"the CLI took {wall:.1f}s to exit (limit {scaled(1 + 5):.1f}s on this machine)"
    *results, tail = lines
    # finished before the block: reported and stored; the stuck one reported errored with the
    # reason; the report finished (its summary line) before the process left
    by_name = {line["name"]: line for line in results}
    assert {name: line["status"] for name, line in by_name.items()} == {
        "fine": "passed",
        "cannot be interrupted": "errored",
    }
    stuck = by_name["cannot be interrupted"]["error"]
    assert "blocked the event loop" in stuck and "could not be interrupted" in stuck
    assert tail["summaries"][0]["errored"] == 1
    stored = LocalResultStore(tmp_path / ".agent_health" / "results")
    assert stored.get(ResultKey("demo@v2", "hang", "hang::fine")).status == "passed"
    assert "test 'hang::cannot-be-interrupted' blocked the event loop" in proc.stderr
    assert "could not be interrupted" in proc.stderr and "exiting" in proc.stderr
    (manifest,) = (tmp_path / ".agent_health" / "results" / "_runs").glob("*/run.json")
    assert json.loads(manifest.read_text())["status"] == "interrupted"


def test_call_site_of_a_frame_without_a_line_number_names_its_function() -> None:
    # CPython reports f_lineno None for a frame being set up or torn down; the watchdog thread
    # took a TypeError from linecache there and died, so no later blocked loop was reported.
    from types import SimpleNamespace

    from agent_health.engine import watchdog

    code = test_call_site_of_a_frame_without_a_line_number_names_its_function.__code__
    frame = SimpleNamespace(f_code=code, f_lineno=None)
    site = watchdog._site(frame)  # type: ignore[arg-type]
    assert site.startswith(f"test_watchdog.py:{code.co_firstlineno} in {code.co_name}")


def test_a_guarded_trial_leaves_no_cycle_for_the_garbage_collector() -> None:
    """`guard` keeps its own frame in a local (the frame is how the watchdog finds a trial): it
    must let go of it, or each trial's frame and what it holds wait for the garbage collector."""
    import gc

    from agent_health.engine.watchdog import Watchdog

    class Marker:  # something a trial returns, to find in the garbage
        pass

    async def trial() -> Marker:
        await asyncio.sleep(0)
        return Marker()

    async def go() -> list[str]:
        dog = Watchdog(interrupt=False).start()
        try:
            gc.collect()
            gc.disable()
            try:
                for i in range(10):
                    w = dog.watch(f"t{i}", 5.0)
                    await dog.guard(w, trial())
                    dog.unwatch(w)
                gc.set_debug(gc.DEBUG_SAVEALL)
                gc.collect()
                return [type(o).__name__ for o in gc.garbage]
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
                gc.enable()
        finally:
            dog.stop()

    garbage = asyncio.run(go())
    assert "frame" not in garbage and "Marker" not in garbage, sorted(set(garbage))
