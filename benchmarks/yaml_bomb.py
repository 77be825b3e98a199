"""Benchmark: how fast and in how little memory a YAML alias bomb is rejected (target: well under
a second and a few MB; unbounded, the document took 56 s and 0.96 GB).

    python benchmarks/yaml_bomb.py [--repeat 20]

Loads tests/faults/data/billion-laughs.yaml (aliases nine levels deep, ten to a level: 10^9 strings
in 1.3 KB) through `agent_health.load_tests`, as the CLI and Dagster load it, and prints the wall
time (best and median of the repeats) and the peak Python memory of one load (tracemalloc)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_health import load_tests  # noqa: E402

BOMB = ROOT / "tests" / "faults" / "data" / "billion-laughs.yaml"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        result = load_tests([BOMB])
        times.append(time.perf_counter() - t0)
    assert not result.tests and len(result.errors) == 1, result.errors
    tracemalloc.start()
    load_tests([BOMB])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"document: {BOMB.relative_to(ROOT)} ({BOMB.stat().st_size:,} bytes)")
    print(f"rejected: {result.errors[0]}")
    print(f"time to reject: best {min(times) * 1000:.1f} ms, median {statistics.median(times) * 1000:.1f} ms")
    print(f"peak Python memory of one load: {peak / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
