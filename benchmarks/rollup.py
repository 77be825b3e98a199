"""Benchmark: a suite rollup over 10,000 stored results (target: at most 1 s).

    python benchmarks/rollup.py [--results 10000]

Results are real demo-agent results (trajectory, signals, usage) copied under 10,000 test ids
with mixed statuses, labels and epochs, written to a local result store. Prints the time to load
them from the store, to roll them up, and both together; plus the leaderboard and comparison."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_health import TestResult, load_config, load_tests
from agent_health.analysis.compare import compare
from agent_health.analysis.insights import rollup_recommendations
from agent_health.analysis.rollup import leaderboard, rollup
from agent_health.session import run_tests
from agent_health.stores import LocalResultStore
from tests.evalkit import write_config, write_evals


def templates(root: Path) -> list[TestResult]:
    write_evals(root)
    write_config(root)
    config = load_config(cwd=root)
    tests = load_tests([config.path(config.eval_root)], root=config.path(config.eval_root)).tests
    return run_tests(tests, config, "demo@v2") + run_tests(tests, config, "demo@v1")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=int, default=10_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ah-rollup-"))
    base = templates(root)
    rng = random.Random(7)
    store = LocalResultStore(root / "results")
    for agent in ("bench@v1", "bench@v2"):
        for i in range(args.results):
            t = base[i % len(base)]
            status = "errored" if i % 97 == 0 else rng.choice(["passed", "passed", "failed"])
            extra = {"epochs": 3, "pass_at_k": 1.0, "pass_hat_k": 0.0, "flaky": True} if i % 10 == 0 else {}
            store.put(
                t.model_copy(
                    update={
                        "test_id": f"bench::t{i:05d}",
                        "suite": "bench",
                        "agent": agent,
                        "status": status,
                        "duration_ms": rng.uniform(5, 500),
                        "labels": (f"group:{i % 13}", "category:RCA"),
                        **extra,
                    }
                )
            )
    start = time.perf_counter()
    full = store.load(agent="bench@v2", suite="bench")
    loaded_full = time.perf_counter() - start
    start = time.perf_counter()
    results = list(store.get_summaries(store.list(agent="bench@v2", suite="bench")))
    loaded = time.perf_counter() - start
    assert len(full) == len(results)
    start = time.perf_counter()
    ru = rollup(results, "bench", "bench@v2", rollup_recommendations(results))
    rolled = time.perf_counter() - start
    assert ru.total == args.results
    base_results = list(store.get_summaries(store.list(agent="bench@v1", suite="bench")))
    start = time.perf_counter()
    cmp = compare(base_results, results, "bench@v1", "bench@v2")
    compared = time.perf_counter() - start
    start = time.perf_counter()
    board = leaderboard([ru, rollup(base_results, "bench", "bench@v1")])
    boarded = time.perf_counter() - start
    print(f"results: {len(results)} per version (local store at {store.root})")
    print(f"load full TestResults from store: {loaded_full:.3f} s")
    print(f"load summaries from store (what the rollup asset reads): {loaded:.3f} s")
    print(f"rollup computation (incl. recommendations): {rolled:.3f} s")
    print(f"load summaries + rollup: {loaded + rolled:.3f} s  (target <= 1 s)")
    print(f"comparison of two versions: {compared:.3f} s ({len(cmp.regressions)} regressions)")
    print(f"leaderboard over the two rollups (+ one more rollup): {boarded:.3f} s ({len(board.rows)} rows)")


if __name__ == "__main__":
    main()
