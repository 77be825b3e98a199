"""Benchmark: suite rollups over many stored results, on each result store.

    python benchmarks/rollup.py [--store local|s3|opensearch] [--results 10000] [--writes put_many|put]

Targets: 10,000 results at most 1 s on local and 3 s on S3 and OpenSearch; 50,000 at most 5 s
on local with peak memory at most 300 MB. Results are real demo-agent results (trajectory,
signals, usage, insights) copied under N test ids per agent version with mixed statuses, labels
and epochs, and written with the store's bulk write (`--writes put_many`, 2,000 at a time) or
one `put` per result from 16 threads, as the engine's result sink stores them (`--writes put`).
The S3 store runs against a moto server process on 127.0.0.1 (`--endpoint` to use another),
OpenSearch against the test node (`--url` to use another).

The reads run in a fresh process (another machine's first read after the backfill), so its peak
memory (VmHWM) is the rollup's own: the time to load the summaries (the first read, then a
second one), the rollup, the comparison of two versions and the leaderboard. On S3 it also says
how many summary log chunks the first and the second read found."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "services" / "opensearch"))

from agent_health import TestResult, load_config, load_tests  # noqa: E402
from agent_health.analysis.compare import compare  # noqa: E402
from agent_health.analysis.insights import rollup_recommendations  # noqa: E402
from agent_health.analysis.rollup import leaderboard, load_summaries, rollup  # noqa: E402
from agent_health.config import Config  # noqa: E402
from agent_health.model import StoreSettings  # noqa: E402
from agent_health.session import run_tests  # noqa: E402
from agent_health.stores import ResultStore, S3ResultStore, open_store  # noqa: E402
from tests.evalkit import write_config, write_evals  # noqa: E402
from tests.support.s3 import moto_server_process  # noqa: E402

AGENTS = ("bench@v1", "bench@v2")


def templates(root: Path) -> list[TestResult]:
    write_evals(root)
    write_config(root)
    config = load_config(cwd=root)
    tests = load_tests([config.path(config.eval_root)], root=config.path(config.eval_root)).tests
    return run_tests(tests, config, "demo@v2") + run_tests(tests, config, "demo@v1")


def fill(store: ResultStore, base: list[TestResult], n: int, writes: str = "put_many") -> None:
    rng = random.Random(7)
    sink = ThreadPoolExecutor(16)  # the engine's result sink: 16 writer threads, one put per result
    write = store.put_many if writes == "put_many" else lambda batch: list(sink.map(store.put, batch))
    for agent in AGENTS:
        batch: list[TestResult] = []
        for i in range(n):
            t = base[i % len(base)]
            status = "errored" if i % 97 == 0 else rng.choice(["passed", "passed", "failed"])
            extra = {"epochs": 3, "pass_at_k": 1.0, "pass_hat_k": 0.0, "flaky": True} if i % 10 == 0 else {}
            batch.append(
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
            if len(batch) == 2000:
                write(batch)
                batch = []
        write(batch)
    sink.shutdown()


def log_chunks(store: ResultStore, agent: str, suite: str) -> str:
    """How many summary log chunks an S3 store has for one suite (other stores: nothing)."""
    if not isinstance(store, S3ResultStore):
        return ""
    folder = store.log.folder(agent, suite)
    return f" ({sum(1 for name, _ in store.bucket.list(folder) if name.endswith('.jsonl'))} log chunks)"


def peak_mb() -> float:
    """This process's peak resident memory since its exec (VmHWM: ru_maxrss would also count the
    memory of the process that forked it, which holds the library and the results it wrote)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # not Linux


def measure(settings: StoreSettings, n: int) -> None:
    """The read side, in its own process: times and peak memory of what the rollup asset does."""
    store = open_store(Config(root=tempfile.gettempdir()), settings)
    tests = [f"bench::t{i:05d}" for i in range(n)]
    load = os.getloadavg()  # the machine is shared: the figures mean little without it
    chunks_before = log_chunks(store, "bench@v2", "bench")
    start = time.perf_counter()
    results = load_summaries(store, "bench@v2", "bench", tests)
    loaded = time.perf_counter() - start
    chunks_after = log_chunks(store, "bench@v2", "bench")
    assert len(results) == n, (len(results), n)
    del results  # one copy at a time: the peak below is what one reader holds, not two
    start = time.perf_counter()
    results = load_summaries(store, "bench@v2", "bench", tests)
    loaded_again = time.perf_counter() - start
    assert len(results) == n, (len(results), n)
    start = time.perf_counter()
    ru = rollup(results, "bench", "bench@v2", rollup_recommendations(results))
    rolled = time.perf_counter() - start
    assert ru.total == n
    rollup_peak_mb = peak_mb()
    base_results = load_summaries(store, "bench@v1", "bench", tests)
    start = time.perf_counter()
    cmp = compare(base_results, results, "bench@v1", "bench@v2")
    compared = time.perf_counter() - start
    start = time.perf_counter()
    board = leaderboard([ru, rollup(base_results, "bench", "bench@v1")])
    boarded = time.perf_counter() - start
    peak = peak_mb()
    target = 1.0 if settings.type == "local" and n <= 10_000 else 5.0 if settings.type == "local" else 3.0
    print(f"results: {n} per version ({settings.type} store at {store.location})")
    one, five, fifteen = load
    cores = os.cpu_count()
    print(f"machine load average before the reads: {one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min; {cores} cores)")
    print(f"load summaries, first read{chunks_before}: {loaded:.3f} s; second read{chunks_after}: {loaded_again:.3f} s")
    print(f"rollup computation (incl. recommendations): {rolled:.3f} s")
    print(f"first read + rollup: {loaded + rolled:.3f} s  (target <= {target:g} s)")
    print(f"second read + rollup: {loaded_again + rolled:.3f} s")
    print(f"comparison of two versions: {compared:.3f} s ({len(cmp.regressions)} regressions)")
    print(f"leaderboard over the two rollups (+ one more rollup): {boarded:.3f} s ({len(board.rows)} rows)")
    print(
        f"peak memory of the reading process after the rollup: {rollup_peak_mb:.0f} MB"
        + ("  (target <= 300 MB)" if n > 10_000 else "")
        + f"; after also loading the second version and comparing: {peak:.0f} MB"
    )


def store_settings(kind: str, args: argparse.Namespace, stack: contextlib.ExitStack, root: Path) -> StoreSettings:
    if kind == "local":
        return StoreSettings(type="local", settings={"path": str(root / "results")})
    if kind == "s3":
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        endpoint = args.endpoint or stack.enter_context(moto_server_process())
        bucket = args.bucket or f"ah-bench-{uuid.uuid4().hex[:8]}"
        if not args.bucket:
            import boto3

            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
        return StoreSettings(type="s3", settings={"bucket": bucket, "prefix": "bench", "endpoint_url": endpoint})
    from node import running_node

    url = args.url or stack.enter_context(running_node())
    return StoreSettings(type="opensearch", settings={"url": url, "index": f"ah-bench-{uuid.uuid4().hex[:8]}"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("local", "s3", "opensearch"), default="local")
    parser.add_argument("--results", type=int, default=10_000)
    parser.add_argument("--writes", choices=("put_many", "put"), default="put_many", help="how the results are written")
    parser.add_argument("--endpoint", help="s3: an S3-compatible endpoint to use (default: start moto_server)")
    parser.add_argument("--bucket", help="s3: an existing bucket (default: a new one)")
    parser.add_argument("--url", help="opensearch: a node to use (default: start the test node)")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # the reading child: StoreSettings JSON
    args = parser.parse_args()
    if args.measure:
        measure(StoreSettings.model_validate_json(args.measure), args.results)
        return
    root = Path(tempfile.mkdtemp(prefix="ah-rollup-"))
    try:
        with contextlib.ExitStack() as stack:
            settings = store_settings(args.store, args, stack, root)
            store = open_store(Config(root=str(root)), settings)
            start = time.perf_counter()
            fill(store, templates(root), args.results, args.writes)
            print(f"wrote {2 * args.results} results with {args.writes} in {time.perf_counter() - start:.1f} s")
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--results",
                    str(args.results),
                    "--measure",
                    json.dumps(settings.model_dump()),
                ],
                check=True,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
