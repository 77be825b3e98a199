"""docs/reliability.md states how many fault cases the suite tries: the numbers are the
ones pytest collects."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.faults.conftest import ROOT, process_env


def collected(*args: str) -> int:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=process_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    last = proc.stdout.strip().splitlines()[-1]
    match = re.match(r"(\d+)(?:/\d+)? tests? collected", last)
    assert match, proc.stdout[-2000:] + proc.stderr[-2000:]
    return int(match.group(1))


def test_readme_counts_are_the_collected_fault_cases():
    section = (ROOT / "docs" / "reliability.md").read_text()
    stated = int(re.search(r"tries \*\*(\d+) fault cases\*\*", section).group(1))
    assert collected("-m", "fault", "tests/faults") == stated
    rows = re.findall(r"\| `(test_faults_\w+\.py)` \| (\d+) \|", section)
    assert rows and sum(int(n) for _, n in rows) == stated
    for name, count in rows:
        assert collected(f"tests/faults/{name}") == int(count), name
