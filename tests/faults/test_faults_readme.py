"""docs/reliability.md states how many fault cases the suite tries: the numbers are the
ones pytest collects."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.faults.conftest import ROOT, process_env
from tests.support.timing import scaled


def collected(*args: str) -> tuple[int, list[str]]:
    """How many tests pytest collects with ARGS, and their node ids."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=process_env(),
        capture_output=True,
        text=True,
        timeout=scaled(120),  # a collection imports the whole suite: slow on a busy machine
    )
    lines = proc.stdout.strip().splitlines()
    match = re.match(r"(\d+)(?:/\d+)? tests? collected", lines[-1])
    assert match, proc.stdout[-2000:] + proc.stderr[-2000:]
    return int(match.group(1)), [line for line in lines if "::" in line]


def test_readme_counts_are_the_collected_fault_cases():
    section = (ROOT / "docs" / "reliability.md").read_text()
    stated = int(re.search(r"tries \*\*(\d+) fault cases\*\*", section).group(1))
    total, ids = collected("-m", "fault", "tests/faults")
    assert total == stated
    rows = re.findall(r"\| `(test_faults_\w+\.py)` \| (\d+) \|", section)
    assert rows and sum(int(n) for _, n in rows) == stated
    # each file's cases from the same collection (a collection per file took 39 processes; every
    # test of those files is a fault case, tests/faults/conftest.py)
    for name, count in rows:
        assert sum(1 for i in ids if i.startswith(f"tests/faults/{name}::")) == int(count), name
