"""Time limits in tests follow the machine (tests/support/timing.py): five tests failed only because
the machine was busy (issue 19). The factor is measured, it grows when the machine is busy, and the
slow tests' per-test timeout is stretched by it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pytest_timeout import get_env_settings

from tests.conftest import ROOT, pytest_collection_modifyitems
from tests.support.timing import MAX_FACTOR, load_factor, machine_factor, scaled


def test_the_factor_is_measured_once_and_bounded():
    factor = machine_factor()
    assert 1.0 <= factor <= MAX_FACTOR
    assert machine_factor() == factor  # once per session: every limit of a session agrees
    assert scaled(6) == pytest.approx(6 * factor)


# Quiet and busy alternate in one process pinned to one core, the busy runs sharing it with two
# processes spinning on the same core (stopped between them): the pairs see the same outside load,
# so the comparison holds however busy the rest of the machine is, and the other cores stay free.
PAIRS = """
import os, signal, statistics, subprocess, sys
from tests.support.timing import workload_seconds

core = max(os.sched_getaffinity(0))
os.sched_setaffinity(0, {core})
hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
try:
    for hog in hogs:
        os.sched_setaffinity(hog.pid, {core})
        os.kill(hog.pid, signal.SIGSTOP)
    quiet, busy = [], []
    for _ in range(3):
        quiet.append(statistics.median(workload_seconds() for _ in range(3)))
        for hog in hogs:
            os.kill(hog.pid, signal.SIGCONT)
        busy.append(statistics.median(workload_seconds() for _ in range(3)))
        for hog in hogs:
            os.kill(hog.pid, signal.SIGSTOP)
    print(statistics.median(quiet), statistics.median(busy))
finally:
    for hog in hogs:
        hog.kill()
        hog.wait()
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="pins processes to a core (Linux)")
def test_a_busy_machine_measures_slower():
    """The workload with its core kept busy by other processes takes clearly longer, so the factor
    follows how busy the machine is, not only how fast it is."""
    out = subprocess.run(
        [sys.executable, "-c", PAIRS],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
        timeout=scaled(120),
    )
    quiet, busy = map(float, out.stdout.split())
    assert busy > 1.25 * quiet, (quiet, busy)


def test_slow_tests_get_the_per_test_timeout_stretched_to_this_machine(request):
    """What tests/conftest.py does at collection to a `slow` test (a real dagster dev, PostgreSQL
    deployments), shown on this test's own item."""
    timeout = get_env_settings(request.config).timeout
    if not timeout:
        pytest.skip("pytest-timeout is off in this session (--timeout 0)")
    item = request.node
    item.add_marker(pytest.mark.slow)
    pytest_collection_modifyitems(request.config, [item])
    marker = item.get_closest_marker("timeout")
    assert marker is not None and marker.args == (pytest.approx(timeout * machine_factor()),)


def test_the_load_factor_is_the_load_per_core_within_bounds():
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    assert load_factor() == pytest.approx(min(MAX_FACTOR, max(1.0, per_core)), rel=0.5)
    assert 1.0 <= load_factor() <= MAX_FACTOR
