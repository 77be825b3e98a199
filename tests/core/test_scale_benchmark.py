"""benchmarks/scale.py prints every figure of issue 25 in one table from one run (here at the
--quick sizes; the figures themselves are the benchmark's business, not a test's)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

# each row of the table: its figure, and whether --quick --stores local,s3 measures it
ROWS = [
    (r"HTTP engine, 100 x 200 ms, c64: time / ideal", True),
    (r"peak RSS, CLI run of 200 tests", True),
    (r"peak RSS, CLI run of 1,000 tests", True),
    (r"peak RSS, CLI run of 2,000 tests", True),
    (r"loading: --list peak RSS per test \(1,000 to 2,000\)", True),
    (r"run minus loading, 2,000 tests", True),
    (r"compare, 2 x 200 results \(local\)", True),
    (r"compare, 2 x 1,000 results \(local\)", True),
    (r"compare growth, 1,000 / 200 results", True),
    (r"compare, 2 x 1,000 results: peak RSS \(local\)", True),
    (r"rollup, 200 results \(local\)", True),
    (r"rollup, 1,000 results \(local\)", True),
    (r"rollup, 200 results \(s3\)", True),
    (r"rollup, 1,000 results \(s3\)", True),
    (r"rollup, 200 results \(opensearch\)", False),
    (r"rollup, 1,000 results \(opensearch\)", False),
    (r"CLI start CPU, PYTHONDONTWRITEBYTECODE=1", True),
    (r"CLI start CPU, with / without the variable", True),
]


@pytest.mark.slow
def test_scale_benchmark_prints_every_figure_of_issue_25_against_its_target():
    proc = subprocess.run(
        [sys.executable, "benchmarks/scale.py", "--quick", "--repeat", "1", "--stores", "local,s3"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = proc.stdout.split("figure ", 1)[1]  # the table starts at its header
    rows = [line for line in table.splitlines()[2:] if line.strip() and not line.startswith("load average")]
    assert len(rows) == len(ROWS), table
    for (figure, is_measured), line in zip(ROWS, rows):
        assert re.match(figure, line), (figure, line)
        if is_measured:  # a figure with its unit, then the target, then (where there is one) the verdict
            assert re.search(r"\s\d[\d.,]* (x|MB|KB|s)\s", line) and "not measured" not in line, line
        else:
            assert "not measured (--stores)" in line, line
    assert re.search(r"\s(met|MISSED)$", rows[0]), rows[0]  # a target has a verdict
