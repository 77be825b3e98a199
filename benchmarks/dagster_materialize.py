"""Benchmark: Dagster's bookkeeping for the one evaluation step, on the local default instance
(the SQLite dagster.yaml the project writes), public APIs only.

    python benchmarks/dagster_materialize.py [--tests 5000] [--load-suites 20 --load-tests 250]

Prints:
- registering N test partitions with their data versions (what the headless job and the
  eval-files sensor do): target <= 3 s for 5,000;
- one results+metrics+insights step over N partitions in ONE run, end to end, the engine's own
  time inside it, and Dagster's bookkeeping per partition = (run wall - engine wall) / N:
  target <= 20 ms on the local default for 5,000;
- loading the code location with S suites of T tests each: target <= 5 s for 20 x 250.
The zero-latency demo agent answers; the numbers include the result store's writes."""

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


def cases(n: int, tag: str = "") -> str:
    rows = [
        {
            "name": f"case {tag}{i:05d}",
            "prompt": PROMPTS[i % 3],
            "labels": [f"group:{i % 7}"],
            "expected_tools": ["search_logs"],
        }
        for i in range(n)
    ]
    return json.dumps({"tests": rows})


def write_project(root: Path, suites: int, tests: int) -> None:
    (root / "evals").mkdir(parents=True)
    for s in range(suites):
        (root / "evals" / f"bench{s:02d}.json").write_text(cases(tests, f"{s}-"))
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


def fresh_home(root: Path, postgres_url: str | None = None) -> Path:
    from definitions.headless import instance_yaml

    home = root / "dagster_home"
    home.mkdir()
    text = instance_yaml()
    if postgres_url:  # a PostgreSQL-backed instance (needs dagster-postgres)
        text += f"storage:\n  postgres:\n    postgres_url: {postgres_url}\n"
    (home / "dagster.yaml").write_text(text)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def measure_load(suites: int, tests: int) -> float:
    """Wall time to build the code location (discover, import, hash) in a fresh process."""
    import subprocess

    root = Path(tempfile.mkdtemp(prefix="ah-load-"))
    write_project(root, suites, tests)
    code = (
        "import time, warnings; warnings.filterwarnings('ignore'); t = time.perf_counter()\n"
        "from definitions.defs.build import build_pipeline\n"
        "p = build_pipeline(); p.defs.get_repository_def().load_all_definitions()\n"
        "print(time.perf_counter() - t)"
    )
    env = {**os.environ, "AGENT_HEALTH_CONFIG": str(root / "agent_health_config.py")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tests", type=int, default=5000)
    parser.add_argument("--agent", default="demo@v2")
    parser.add_argument("--load-suites", type=int, default=20)
    parser.add_argument("--load-tests", type=int, default=250)
    parser.add_argument("--skip-load", action="store_true", help="Skip the code location load figure.")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="Measure on a PostgreSQL-backed instance (postgresql://...; dagster-postgres).",
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ah-bench-"))
    write_project(root, 1, args.tests)
    os.environ["AGENT_HEALTH_CONFIG"] = str(root / "agent_health_config.py")
    home = fresh_home(root, args.postgres)

    from dagster import DagsterInstance

    from agent_health.pipeline import run_partitions
    from definitions.defs.build import build_pipeline
    from definitions.defs.partitions import range_tags
    from definitions.headless import QUIET, register

    engine_time = time_engine_calls()  # time inside the results asset's engine call, in the run itself
    pipeline = build_pipeline()
    suite = pipeline.suites[0]
    with DagsterInstance.get() as instance:
        start = time.perf_counter()
        register(instance, pipeline)
        registration = time.perf_counter() - start
        tests = list(instance.get_dynamic_partitions(suite.names.tests_partitions))
        assert len(tests) == args.tests, len(tests)

        job = pipeline.defs.resolve_job_def(suite.names.job)
        job.execute_in_process(instance=instance, tags=range_tags([args.agent], tests[:1]), run_config=QUIET)  # warm-up
        engine_time.clear()
        start = time.perf_counter()
        result = job.execute_in_process(instance=instance, tags=range_tags([args.agent], tests), run_config=QUIET)
        step = time.perf_counter() - start
        in_run_engine = sum(engine_time)
        assert result.success
        start = time.perf_counter()
        run_partitions(pipeline.project, suite.suite, {args.agent: tests})
        engine_alone = time.perf_counter() - start

    n = args.tests
    where = "PostgreSQL instance" if args.postgres else "local default instance (SQLite)"
    print(f"{where}, DAGSTER_HOME {home}; {n} partitions of one suite, agent {args.agent}")
    print(f"register {n} test partitions with their data versions: {registration:.2f} s  (target <= 3 s for 5,000)")
    print(f"results + metrics + insights step, one run, end to end: {step:.2f} s")
    print(f"engine inside the run: {in_run_engine:.2f} s; the same tests outside Dagster: {engine_alone:.2f} s")
    print(
        f"Dagster bookkeeping per partition ((run - engine) / N): {(step - in_run_engine) / n * 1000:.2f} ms"
        "  (target <= 20 ms on the local default)"
    )
    if not args.skip_load:
        load = measure_load(args.load_suites, args.load_tests)
        print(f"code location load, {args.load_suites} suites x {args.load_tests} tests: {load:.2f} s  (target <= 5 s)")


if __name__ == "__main__":
    main()
