"""A loaded test holds under 1 KB (issue 25), a code test and a data case alike."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.slow
def test_a_loaded_code_test_or_data_case_holds_under_1_kb():
    # benchmarks/loading.py loads 5,000 tests of each kind (a loop of `@test`s, native YAML cases,
    # agent-health JSON cases) and prints what loading keeps per test by tracemalloc. In a process
    # of its own, what it measures is the loader's alone: threads other tests left running here
    # would allocate meanwhile (and tracing deep enough to tell them apart takes minutes).
    proc = subprocess.run(
        [sys.executable, "benchmarks/loading.py", "--tests", "5000"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    held = {kind: float(b) for kind, b in re.findall(r"^\s+(code|yaml|json)\s+(\d+) B a test", proc.stdout, re.M)}
    assert set(held) == {"code", "yaml", "json"}, proc.stdout
    for kind, per_test in held.items():
        assert per_test < 1024, f"a loaded {kind} test holds {per_test:.0f} bytes\n{proc.stdout}"
        # a real figure, not a measurement that missed the tests: a case's id, name and hash alone
        # are over 250 bytes
        assert per_test > 300, proc.stdout
    # a data case keeps only what differs from its file's other cases (its TestCase is made when
    # read): about 370 bytes, 560-600 when each kept a TestCase of its own
    assert held["json"] < 450 and held["yaml"] < 450, proc.stdout
