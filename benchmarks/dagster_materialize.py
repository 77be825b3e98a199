"""Benchmark: materialize one suite of N test partitions for one agent version in ONE Dagster run
on a SQLite instance, with the zero-latency demo agent.

    python benchmarks/dagster_materialize.py [--tests 1000]

Prints the end-to-end time of the run, the engine's own time for the same tests outside Dagster,
and Dagster's bookkeeping per partition (the difference over N). Targets: <= 10 s end to end,
<= 5 ms bookkeeping per partition."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

PROMPTS = [
    "Diagnose why the payment service is failing.",
    "Why is checkout slow? p99 latency is up.",
    "The orders queue is backing up. Find out why.",
]


def write_project(root: Path, n: int) -> None:
    (root / "evals").mkdir(parents=True)
    cases = [
        {
            "name": f"case {i:05d}",
            "prompt": PROMPTS[i % 3],
            "labels": [f"group:{i % 7}"],
            "expected_tools": ["search_logs"],
        }
        for i in range(n)
    ]
    (root / "evals" / "bench.json").write_text(json.dumps({"tests": cases}))
    (root / "agent_health_config.py").write_text(
        "from agent_health import define_config\nconfig = define_config(concurrency=64)\n"
    )


def time_engine_calls() -> list[float]:
    """Patch the results asset's engine call to record how long each call takes (the run's own
    engine time, subtracted from the run to leave Dagster's bookkeeping); returns the list."""
    import definitions.defs.suite_assets as suite_assets

    engine_time: list[float] = []
    real_run = suite_assets.run_partitions

    def timed_run(*a, **kw):
        t0 = time.perf_counter()
        try:
            return real_run(*a, **kw)
        finally:
            engine_time.append(time.perf_counter() - t0)

    suite_assets.run_partitions = timed_run
    return engine_time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--agent", default="demo@v2")
    parser.add_argument(
        "--stock-sqlite",
        dest="pooled_sqlite",
        action="store_false",
        help="Use Dagster's stock SQLite event log instead of the pooled one the headless job "
        "configures for installed projects.",
    )
    parser.add_argument("--results-only", action="store_true", help="Skip the 3-asset run.")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ah-bench-"))
    write_project(root, args.tests)
    os.environ["AGENT_HEALTH_CONFIG"] = str(root / "agent_health_config.py")
    os.environ["DAGSTER_HOME"] = str(root / "dagster_home")
    (root / "dagster_home").mkdir()
    from definitions.headless import instance_yaml

    (root / "dagster_home" / "dagster.yaml").write_text(instance_yaml(root / "dagster_home", args.pooled_sqlite))

    from dagster import DagsterInstance

    from agent_health.pipeline import run_partitions
    from definitions.defs.build import build_pipeline
    from definitions.defs.partitions import range_tags
    from definitions.headless import QUIET, register

    engine_time = time_engine_calls()  # time inside the results asset's engine call, in the run itself
    pipeline = build_pipeline()
    suite = pipeline.suites[0]
    with DagsterInstance.get() as instance:
        register(instance, pipeline)
        tests = list(instance.get_dynamic_partitions(suite.names.tests_partitions))
        assert len(tests) == args.tests, len(tests)

        job = pipeline.defs.resolve_job_def(suite.names.job)
        # warm-up: one partition (imports, job resolution), not counted
        job.execute_in_process(instance=instance, tags=range_tags([args.agent], tests[:1]), run_config=QUIET)

        engine_time.clear()
        start = time.perf_counter()
        result = (
            pipeline.defs.get_implicit_global_asset_job_def()
            .get_subset(asset_selection={suite.key("results")})
            .execute_in_process(instance=instance, tags=range_tags([args.agent], tests), run_config=QUIET)
        )
        results_only = time.perf_counter() - start
        in_run_engine = sum(engine_time)
        assert result.success
        mats = instance.fetch_materializations(suite.key("results"), limit=args.tests + 10).records
        per_partition = {m.partition_key for m in mats if m.run_id == result.run_id}

        full = float("nan")
        if not args.results_only:
            engine_time.clear()
            start = time.perf_counter()
            result = job.execute_in_process(instance=instance, tags=range_tags([args.agent], tests), run_config=QUIET)
            full = time.perf_counter() - start
            full_engine = sum(engine_time)
            assert result.success

        start = time.perf_counter()
        run_partitions(pipeline.project, suite.suite, {args.agent: tests})
        engine = time.perf_counter() - start
        if args.results_only:
            full_engine = float("nan")

    n = args.tests
    print(
        f"partitions: {n} ({args.agent}, one run, SQLite instance at {root / 'dagster_home'}"
        f"{', pooled event log connections' if args.pooled_sqlite else ''})"
    )
    print(
        f"results asset run, end to end: {results_only:.2f} s  (target <= 10 s); "
        f"materialization events with metadata: {len(per_partition)}"
    )
    print(f"results + metrics + insights run, end to end: {full:.2f} s")
    print(
        f"engine inside the results run (store writes included): {in_run_engine:.2f} s; "
        f"engine alone outside Dagster: {engine:.2f} s"
    )
    print(
        f"Dagster bookkeeping per partition (results run - engine in it) / N: "
        f"{(results_only - in_run_engine) / n * 1000:.2f} ms  (target <= 5 ms)"
    )
    print(
        f"Dagster bookkeeping per partition (3-asset run - engine in it) / N / 3 assets: "
        f"{(full - full_engine) / n / 3 * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
