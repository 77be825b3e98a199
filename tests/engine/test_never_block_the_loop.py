"""Sync user code and blocking I/O run off the event loop: 8 tests at concurrency 8 whose fixture,
hook, trace fetch, evaluator or synthesizer blocks for 0.5 s take about 0.5 s, not 4 s."""

from __future__ import annotations

import threading
import time

from agent_health import define_config, load_tests

from ..core.helpers import run_engine

N, BLOCK_S = 8, 0.5
SERIAL_S = N * BLOCK_S  # what the same run takes when each block holds the loop


def _suite(write_eval, body: str, header: str = "") -> list:
    src = [
        "import time, threading",
        "from agent_health import test, fixture, before_each, after_each, expect",
        header,
    ]
    for i in range(N):
        src += [f"@test('t{i}', prompt='payment service failing {i}')", body.replace("NAME", f"t{i}")]
    path = write_eval("block.eval.py", "\n".join(src) + "\n")
    loaded = load_tests([path])
    assert not loaded.errors, loaded.errors
    return loaded.tests


def _timed(tests, **kw):
    t0 = time.perf_counter()
    res, _ = run_engine(tests, concurrency=N, **kw)
    wall = time.perf_counter() - t0
    assert len(res) == N and all(r.status == "passed" for r in res.values()), [r.error for r in res.values()]
    return res, wall


def test_sync_fixture_setup_and_teardown_run_off_the_loop(write_eval):
    tests = _suite(
        write_eval,
        "def NAME(slow):\n    expect(slow).to_equal('ready')",
        header=(
            f"@fixture\ndef slow():\n    time.sleep({BLOCK_S / 2})\n    yield 'ready'\n    time.sleep({BLOCK_S / 2})\n"
        ),
    )
    _, wall = _timed(tests)
    assert wall < SERIAL_S / 2, f"{wall:.2f}s: the fixture blocked the loop"


def test_async_body_with_sync_fixture_and_sync_hooks(write_eval):
    tests = _suite(
        write_eval,
        "async def NAME(slow):\n    assert threading.current_thread() is threading.main_thread()",
        header=(
            "@fixture\n"
            f"def slow():\n    time.sleep({BLOCK_S / 2})\n    return 1\n"
            "@before_each\n"
            f"def hook():\n    time.sleep({BLOCK_S / 4})\n"
            "@after_each\n"
            f"def hook2():\n    time.sleep({BLOCK_S / 4})\n"
        ),
    )
    _, wall = _timed(tests)
    assert wall < SERIAL_S / 2, f"{wall:.2f}s: a sync fixture or hook blocked the loop"


def test_a_blocking_trace_fetch_in_the_metrics_analyzer_runs_off_the_loop(tmp_path, write_eval):
    # An agent with traces whose spans never arrive: deriving the trace metrics waits (and sleeps)
    # metrics_wait_s for them after every test.
    (tmp_path / "slow_agent.py").write_text("def answer(prompt):\n    return 'the database is down'\n")
    config = define_config(
        root=str(tmp_path),
        agents=[
            {
                "key": "py",
                "connector": "python",
                "traces": True,
                "settings": {"function": "slow_agent:answer"},
                "versions": {"v1": {}},
            }
        ],
        traces={"source": "local", "metrics_wait_s": BLOCK_S},
    )
    tests = _suite(write_eval, "async def NAME(agent):\n    await agent.run()")
    res, wall = _timed(tests, agent="py@v1", config=config)
    assert all(r.metrics["traces"]["status"] == "unavailable" for r in res.values())
    assert wall < SERIAL_S / 2, f"{wall:.2f}s: the trace fetch blocked the loop"


def test_sync_custom_evaluators_and_synthesizers_run_off_the_loop(tmp_path, write_eval):
    seen: list[bool] = []

    def slow_evaluator(output):
        seen.append(threading.current_thread() is threading.main_thread())
        time.sleep(BLOCK_S / 2)
        return True

    def slow_synthesizer(data):
        seen.append(threading.current_thread() is threading.main_thread())
        time.sleep(BLOCK_S / 2)
        return {"summary": "fine", "recommendations": []}

    config = define_config(root=str(tmp_path), evaluators={"slow": slow_evaluator}, insights=slow_synthesizer)
    tests = _suite(
        write_eval,
        "async def NAME(agent, judge):\n"
        "    r = await agent.run()\n"
        "    await judge(r, {'criteria': 'ok', 'evaluator': 'slow'})",
    )
    res, wall = _timed(tests, config=config)
    assert seen == [False] * (2 * N)
    assert all(any(i.rule == "synthesizer_summary" or i.summary == "fine" for i in r.insights) for r in res.values())
    assert wall < SERIAL_S / 2, f"{wall:.2f}s: an evaluator or synthesizer blocked the loop"
