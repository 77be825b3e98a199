"""A run keeps the garbage collector off what exists when its tests start (gc.freeze), and hands
it back when they end, unless the caller had frozen objects itself (the CLI does, for good)."""

from __future__ import annotations

import gc

from agent_health import RunSettings, define_config, load_tests, run_tests

FROZEN_DURING = """
import gc
from agent_health import test

@test("sees a frozen heap")
async def frozen():
    assert gc.get_freeze_count() > 0, "nothing frozen while the test runs"
"""


def _run(write_eval, tmp_path):
    write_eval("frozen.eval.py", FROZEN_DURING)
    tests = load_tests([tmp_path / "evals"]).tests
    return run_tests(tests, define_config(root=str(tmp_path)), "demo@v2", RunSettings(store=None))


def test_a_run_freezes_the_heap_while_its_tests_run_and_unfreezes_it_after(write_eval, tmp_path):
    gc.unfreeze()  # whatever an earlier test in this process froze
    [result] = _run(write_eval, tmp_path)
    assert result.status == "passed", result.error
    assert gc.get_freeze_count() == 0  # back under the collector: cycles among them can be freed


def test_a_run_leaves_a_freeze_made_before_it_in_place(write_eval, tmp_path):
    gc.unfreeze()
    kept = [[]]  # made before the run and frozen by the caller, as the CLI freezes its loaded tests
    kept[0].append(kept)
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        [result] = _run(write_eval, tmp_path)
        assert result.status == "passed", result.error
        assert gc.get_freeze_count() >= before > 0
    finally:
        gc.unfreeze()


YOUNG_DURING = """
import gc
from agent_health import test

@test("sees the run's threshold")
async def young():
    assert gc.get_threshold()[0] == 10_000, gc.get_threshold()
"""


def test_a_run_collects_young_objects_less_often_while_its_tests_run_then_puts_the_thresholds_back(
    write_eval, tmp_path
):
    # the results in flight to the store are thousands of young objects: at Python's 700 the
    # collector walked them again and again (about 5% of a fixed-answer test's CPU)
    write_eval("young.eval.py", YOUNG_DURING)
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        tests = load_tests([tmp_path / "evals"]).tests
        [result] = run_tests(tests, define_config(root=str(tmp_path)), "demo@v2", RunSettings(store=None))
        assert result.status == "passed", result.error
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(50_000, 10, 10)  # a caller's own choice of fewer collections is kept
        [result] = run_tests(tests, define_config(root=str(tmp_path)), "demo@v2", RunSettings(store=None))
        assert result.status == "failed" and "50000" in (result.error or ""), result.error
        assert gc.get_threshold() == (50_000, 10, 10)
    finally:
        gc.set_threshold(*before)
