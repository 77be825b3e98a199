"""What one loaded test holds (issue 25: under 1 KB a test), by tracemalloc: the bytes still
allocated after `load_tests` of a suite of N tests, divided by N, for a code test (`@test` in a
`*.eval.py`, benchmarks/engine.py's suite) and for data cases (the same tests as native YAML and
as agent-health JSON). Everything the loader keeps counts: the TestCase, the TestSpec, the body
function, their strings, and what the file's registry keeps; modules are imported and a small
suite loaded first, so import-time caches are not counted.

With --rss it measures instead what docs/performance.md's table calls loading per test: the peak RSS of
`agent-health run SUITE --list` (a fresh process, a fresh project folder) at two sizes, and the
slope between them; --tree DIR measures another checkout (e.g. main's) with this interpreter.

    .venv/bin/python benchmarks/loading.py [--tests 5000] [--top 12]
    .venv/bin/python benchmarks/loading.py --rss [--sizes 10000,50000] [--kind code|yaml|json] [--tree DIR]

--top N prints the N source lines that allocated the most of what stays, per kind.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the project is importable
    sys.path.insert(0, str(ROOT))

from benchmarks.engine import Projects, run_process, write_suite  # noqa: E402

TARGET = 1024  # bytes a test
PROMPTS = [
    "Diagnose why the payment service is failing.",
    "checkout p99 latency is high",
    "kafka consumer lag on orders",
    "logs-ingest disk full",
]


def write_yaml_cases(folder: Path, n: int) -> Path:
    """N native-format cases: the code suite's tests as data (a prompt of four, one label, one
    required tool, one outcome)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"cases{n}.yaml"
    lines = ["tests:"]
    for i in range(n):
        lines += [
            f"  - name: case {i:05d}",
            f"    prompt: {PROMPTS[i % 4]}",
            "    labels: [bench]",
            "    expected_tools: [search_logs]",
            "    expected_outcomes: [names the root cause]",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_json_cases(folder: Path, n: int) -> Path:
    """N agent-health-format cases (ids, categories, a trajectory step)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"cases{n}.json"
    cases = [
        {
            "id": f"tc-{i:05d}",
            "name": f"case {i:05d}",
            "category": "RCA",
            "difficulty": "Hard",
            "initialPrompt": PROMPTS[i % 4],
            "expectedOutcomes": ["names the root cause"],
            "expectedTrajectory": [{"step": 1, "description": "search logs", "requiredTools": ["search_logs"]}],
        }
        for i in range(n)
    ]
    path.write_text(json.dumps({"testCases": cases}))
    return path


WRITERS: dict[str, Callable[[Path, int], Path]] = {
    "code": write_suite,
    "yaml": write_yaml_cases,
    "json": write_json_cases,
}


def held_per_test(path: Path, n: int, top: int = 0) -> float:
    """Bytes a test that `load_tests(path)` keeps, by tracemalloc (the result is kept alive while
    measured, then dropped)."""
    from agent_health.loader import load_tests

    gc.collect()
    tracemalloc.start(8 if top else 1)
    before = tracemalloc.take_snapshot() if top else None
    start = tracemalloc.get_traced_memory()[0]
    result = load_tests([path])
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - start
    after = tracemalloc.take_snapshot() if top else None
    tracemalloc.stop()
    if len(result.tests) != n or result.errors:
        raise SystemExit(f"{path.name}: loaded {len(result.tests)} of {n} tests, errors: {result.errors[:3]}")
    if before is not None and after is not None:
        for stat in after.compare_to(before, "lineno")[:top]:
            frame = stat.traceback[0]
            where = frame.filename.removeprefix(str(ROOT) + "/")
            print(f"    {stat.size_diff / n:7.1f} B/test  {where}:{frame.lineno}")
    del result
    return held / n


def measure(n: int, top: int = 0) -> dict[str, float]:
    """Bytes a test of each kind, for suites of `n` tests."""
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="agent-health-loading-") as tmp:
        for kind, write in WRITERS.items():
            held_per_test(write(Path(tmp) / "warm" / kind, 20), 20)  # imports and first-use caches
            if top:
                print(f"  {kind}: the lines that allocated most of what stays")
            figures[kind] = held_per_test(write(Path(tmp) / kind, n), n, top)
    return figures


def rss_slope(sizes: list[int], kind: str, tree: Path, repeat: int) -> None:
    """Peak RSS of `run --list` at each size (the least of `repeat` runs), and the slope per test
    between the first and the last size. This process imports nothing of the library: Linux
    keeps a process's peak RSS across exec, so a large parent would raise its children's."""
    peaks: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="agent-health-loading-") as tmp:
        projects = Projects(Path(tmp) / "projects")
        for size in sizes:
            suite = WRITERS[kind](Path(tmp) / f"{kind}{size}", size)
            runs = []
            for _ in range(repeat):
                cmd = [sys.executable, "-m", "agent_health", "run", str(suite), "--list"]
                proc = run_process(cmd, projects.fresh(), tree)
                if proc.code != 0:
                    raise SystemExit(f"--list of {size:,} tests exited {proc.code}")
                runs.append(proc.rss_kib)
            peaks[size] = min(runs) / 1024
            print(f"  {size:>7,} {kind} tests: --list peak RSS {peaks[size]:.1f} MB", flush=True)
    first, last = sizes[0], sizes[-1]
    per_test = (peaks[last] - peaks[first]) * 1024 * 1024 / (last - first)
    verdict = "met" if per_test < TARGET else "MISSED"
    print(f"  slope {first:,} to {last:,}: {per_test:.0f} B a test ({per_test / 1024:.2f} KB)", end="")
    print(f"   target < 1 KB   {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tests", type=int, default=5000, help="tests in each suite (default 5,000)")
    parser.add_argument("--top", type=int, default=0, help="print the N lines that allocated most of what stays")
    parser.add_argument("--rss", action="store_true", help="the --list peak RSS slope instead (CLI processes)")
    parser.add_argument("--sizes", default="10000,50000", help="--rss: suite sizes (default 10000,50000)")
    parser.add_argument("--kind", choices=sorted(WRITERS), default="code", help="--rss: the kind of test")
    parser.add_argument("--tree", type=Path, default=ROOT, help="--rss: the checkout to measure (default: this)")
    parser.add_argument("--repeat", type=int, default=1, help="--rss: runs per size, the least peak kept")
    opts = parser.parse_args()
    if opts.rss:
        print(f"python {sys.version.split()[0]}; {opts.tree}; {os.getloadavg()[0]:.1f} load average", flush=True)
        return rss_slope([int(s) for s in opts.sizes.split(",")], opts.kind, opts.tree.resolve(), max(1, opts.repeat))
    print(f"python {sys.version.split()[0]}; {opts.tests:,} tests of each kind, held after loading (tracemalloc)")
    for kind, per_test in measure(opts.tests, opts.top).items():
        verdict = "met" if per_test < TARGET else "MISSED"
        print(f"  {kind:5} {per_test:7.0f} B a test   target < {TARGET} B   {verdict}")


if __name__ == "__main__":
    main()
