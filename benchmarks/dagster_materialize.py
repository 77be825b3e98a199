"""Benchmark: Dagster's bookkeeping for the one evaluation step, public APIs only.

    python benchmarks/dagster_materialize.py [--tests 5000] [--per-run K] [--postgres URL]
        [--stock-dagster-env] [--profile FILE] [--skip-load]

Prints:
- registering N test partitions with their data versions (what the headless job and the
  eval-files sensor do): target <= 3 s for 5,000;
- the results+metrics+insights step (`<suite>__evaluate`) over N partitions, in runs of at most
  K partitions (default: the code location's bound, `AGENT_HEALTH_MAX_PARTITIONS_PER_RUN`, as a
  backfill would split them), end to end, the engine's own time inside the runs, and Dagster's
  bookkeeping per partition = (run wall - engine wall) / N: target <= 20 ms on the local default
  (SQLite), <= 10 ms on PostgreSQL; with it the event-log events, SQL connections and SQL
  statements per partition that the bookkeeping consists of;
- loading the code location with S suites of T tests each: target <= 5 s for 20 x 250.

The instance is the one the project writes: the SQLite dagster.yaml of `agent_health_dagster/headless.py`,
or with `--postgres` the documented deploy/postgres/dagster.yaml pointed at that server (a fresh,
empty database). The process runs with the Dagster settings the project's deployments set
(agent_health_dagster/dagster_env.py); `--stock-dagster-env` measures without them. The zero-latency demo
agent answers; the engine's time includes the result store's writes.
benchmarks/postgres_partitions.py measures the same thing on a PostgreSQL it starts (directly and
through PgBouncer) with the S3 store."""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
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


def write_project(root: Path, suites: int, tests: int, store: dict[str, Any] | None = None) -> Path:
    """Eval files and a configuration (concurrency 64; `store` None: local files); returns the
    configuration file."""
    (root / "evals").mkdir(parents=True)
    for s in range(suites):
        (root / "evals" / f"bench{s:02d}.json").write_text(cases(tests, f"{s}-"))
    extra = f", store={store!r}" if store else ""
    config = root / "agent_health_config.py"
    config.write_text(f"from agent_health import define_config\nconfig = define_config(concurrency=64{extra})\n")
    return config


@dataclass
class EngineTime:
    """Wall and CPU seconds spent inside the evaluation step's engine calls."""

    wall: float = 0.0
    cpu: float = 0.0

    def clear(self) -> None:
        self.wall = self.cpu = 0.0


@contextlib.contextmanager
def time_engine_calls() -> Iterator[EngineTime]:
    """While inside, the evaluation step's engine calls add up their wall and CPU time (the run's
    own engine time, subtracted from the run to leave Dagster's bookkeeping) in what is yielded.
    CPU is this process's: while the engine runs, Dagster does nothing else in it."""
    import agent_health_dagster.defs.suite_assets as suite_assets

    spent = EngineTime()
    real_run = suite_assets.run_partitions

    def timed_run(*a, **kw):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return real_run(*a, **kw)
        finally:
            spent.wall += time.perf_counter() - wall
            spent.cpu += time.process_time() - cpu

    suite_assets.run_partitions = timed_run
    try:
        yield spent
    finally:
        suite_assets.run_partitions = real_run


def sqlite_home(root: Path) -> Path:
    """DAGSTER_HOME with the local default's dagster.yaml (SQLite, what the headless job writes)."""
    from agent_health_dagster.headless import instance_yaml

    home = root / "dagster_home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(instance_yaml())
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def postgres_home(root: Path, env: dict[str, str]) -> Path:
    """DAGSTER_HOME with deploy/postgres/dagster.yaml, its DAGSTER_PG_* variables from `env`."""
    home = root / "dagster_home"
    home.mkdir(parents=True)
    shutil.copy(ROOT / "deploy" / "postgres" / "dagster.yaml", home / "dagster.yaml")
    os.environ.update({"DAGSTER_HOME": str(home), **env})
    return home


def postgres_env(url: str) -> dict[str, str]:
    """The DAGSTER_PG_* variables of deploy/postgres/dagster.yaml for a postgresql:// URL."""
    parts = urlsplit(url)
    return {
        "DAGSTER_PG_HOST": parts.hostname or "127.0.0.1",
        "DAGSTER_PG_PORT": str(parts.port or 5432),
        "DAGSTER_PG_DB": parts.path.lstrip("/") or "dagster",
        "DAGSTER_PG_USERNAME": unquote(parts.username or ""),
        "DAGSTER_PG_PASSWORD": unquote(parts.password or ""),
    }


@contextlib.contextmanager
def counting_sql() -> Iterator[dict[str, int]]:
    """Count new database connections and executed SQL statements of every SQLAlchemy engine
    while inside (Dagster's storages are SQLAlchemy engines)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine
    from sqlalchemy.pool import Pool

    counts = {"connections": 0, "statements": 0}

    def on_connect(*_: Any) -> None:
        counts["connections"] += 1

    def on_execute(*_: Any) -> None:
        counts["statements"] += 1

    event.listen(Pool, "connect", on_connect)
    event.listen(Engine, "before_cursor_execute", on_execute)
    try:
        yield counts
    finally:
        event.remove(Pool, "connect", on_connect)
        event.remove(Engine, "before_cursor_execute", on_execute)


@dataclass
class StepFigures:
    """One measurement of the evaluation step over `partitions` partitions in `runs` runs."""

    partitions: int
    runs: int
    wall_s: float
    engine_s: float
    cpu_s: float
    engine_cpu_s: float
    events: int
    connections: int
    statements: int

    @property
    def bookkeeping_ms(self) -> float:
        return (self.wall_s - self.engine_s) / self.partitions * 1000

    @property
    def bookkeeping_cpu_ms(self) -> float:
        return (self.cpu_s - self.engine_cpu_s) / self.partitions * 1000

    def report(self, target_ms: float) -> str:
        n = self.partitions
        return (
            f"results + metrics + insights step, {n} partitions in {self.runs} run(s): {self.wall_s:.2f} s "
            f"end to end, engine inside {self.engine_s:.2f} s\n"
            f"  per partition: {self.events / n:.2f} event-log events, {self.connections / n:.2f} SQL connections, "
            f"{self.statements / n:.2f} SQL statements; Dagster's CPU in this process "
            f"{(self.cpu_s - self.engine_cpu_s) / n * 1000:.2f} ms"
            f" (the engine's {self.engine_cpu_s / n * 1000:.2f} ms)\n"
            f"Dagster bookkeeping per partition ((run - engine) / N): {self.bookkeeping_ms:.2f} ms"
            f"  (target <= {target_ms:g} ms)"
        )


def measure_step(
    instance: Any, pipeline: Any, agent: str, per_run: int | None, engine: EngineTime, profile: str | None = None
) -> StepFigures:
    """Materialize the first suite's evaluation step for `agent` x every registered test, in runs
    of at most `per_run` partitions (contiguous ranges, the shape of a backfill's runs), after a
    one-partition warm-up run."""
    from agent_health_dagster.defs.partitions import bounded_ranges, range_tags
    from agent_health_dagster.headless import QUIET

    suite = pipeline.suites[0]
    tests = list(instance.get_dynamic_partitions(suite.names.tests_partitions))
    job = pipeline.defs.resolve_job_def(suite.names.job)
    job.execute_in_process(instance=instance, tags=range_tags([agent], tests[:1]), run_config=QUIET)  # warm-up
    engine.clear()
    profiler = cProfile.Profile() if profile else None
    run_ids = []
    with counting_sql() as sql:
        start, cpu = time.perf_counter(), time.process_time()
        if profiler:
            profiler.enable()
        for agents, chunk in bounded_ranges([agent], tests, per_run):
            result = job.execute_in_process(instance=instance, tags=range_tags(agents, chunk), run_config=QUIET)
            assert result.success, result.run_id
            run_ids.append(result.run_id)
        if profiler:
            profiler.disable()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    events = sum(len(instance.get_records_for_run(run_id).records) for run_id in run_ids)
    if profiler and profile:
        profiler.dump_stats(profile)
        print(f"profile of the measured runs: {profile} (top 25 by own time below)")
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
    return StepFigures(
        len(tests), len(run_ids), wall, engine.wall, cpu, engine.cpu, events, sql["connections"], sql["statements"]
    )


def register_tests(instance: Any, pipeline: Any) -> float:
    """Register the agent versions and test partitions with their data versions; seconds taken."""
    from agent_health_dagster.headless import register

    start = time.perf_counter()
    register(instance, pipeline)
    return time.perf_counter() - start


def measure_load(suites: int, tests: int) -> float:
    """Wall time to build the code location (discover, import, hash) in a fresh process."""
    root = Path(tempfile.mkdtemp(prefix="ah-load-"))
    config = write_project(root, suites, tests)
    code = (
        "import time, warnings; warnings.filterwarnings('ignore'); t = time.perf_counter()\n"
        "from agent_health_dagster.defs.build import build_pipeline\n"
        "p = build_pipeline(); p.defs.get_repository_def().load_all_definitions()\n"
        "print(time.perf_counter() - t)"
    )
    env = {**os.environ, "AGENT_HEALTH_CONFIG": str(config), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def dagster_settings(stock: bool) -> str:
    """Apply the deployment's Dagster settings to this process (unless `stock`); say which."""
    from agent_health_dagster.dagster_env import DAGSTER_ENV, apply_dagster_env

    if stock:
        for name in DAGSTER_ENV:
            os.environ.pop(name, None)
        return "stock Dagster settings"
    return ", ".join(f"{k}={v}" for k, v in apply_dagster_env().items())


def per_run_limit(requested: int | None) -> int | None:
    """Partitions per run: the one asked for (0: all in one run), else the code location's bound."""
    from agent_health_dagster.defs.build import max_partitions_per_run

    if requested is not None:
        return requested or None
    return max_partitions_per_run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=5000)
    parser.add_argument("--agent", default="demo@v2")
    parser.add_argument("--per-run", type=int, help="Partitions per run (0: one run; default: the code location's).")
    parser.add_argument("--postgres", metavar="URL", help="An empty PostgreSQL database (postgresql://user@host/db).")
    parser.add_argument("--stock-dagster-env", action="store_true", help="Without the deployment's Dagster settings.")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the measured runs into FILE.")
    parser.add_argument("--load-suites", type=int, default=20)
    parser.add_argument("--load-tests", type=int, default=250)
    parser.add_argument("--skip-load", action="store_true", help="Skip the code location load figure.")
    args = parser.parse_args()
    settings = dagster_settings(args.stock_dagster_env)
    root = Path(tempfile.mkdtemp(prefix="ah-bench-"))
    os.environ["AGENT_HEALTH_CONFIG"] = str(write_project(root / "project", 1, args.tests))
    os.environ["AGENT_HEALTH_STATE_DIR"] = str(root / "state")
    home = postgres_home(root, postgres_env(args.postgres)) if args.postgres else sqlite_home(root)

    from dagster import DagsterInstance

    from agent_health.pipeline import run_partitions
    from agent_health_dagster.defs.build import build_pipeline

    pipeline = build_pipeline()
    per_run = per_run_limit(args.per_run)
    where = "PostgreSQL instance (deploy/postgres/dagster.yaml)" if args.postgres else "local default instance (SQLite)"
    print(f"{where}, DAGSTER_HOME {home}; {args.tests} partitions of one suite, agent {args.agent}; {settings}")
    print(f"load average at the start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    with DagsterInstance.get() as instance, time_engine_calls() as engine:
        registration = register_tests(instance, pipeline)
        print(
            f"register {args.tests} test partitions with their data versions: {registration:.2f} s"
            "  (target <= 3 s for 5,000)"
        )
        figures = measure_step(instance, pipeline, args.agent, per_run, engine, args.profile)
        print(figures.report(10 if args.postgres else 20))
        tests = list(instance.get_dynamic_partitions(pipeline.suites[0].names.tests_partitions))
    start = time.perf_counter()
    run_partitions(pipeline.project, pipeline.suites[0].suite, {args.agent: tests})
    print(f"the same tests through the engine alone, outside Dagster: {time.perf_counter() - start:.2f} s")
    if not args.skip_load:
        load = measure_load(args.load_suites, args.load_tests)
        print(f"code location load, {args.load_suites} suites x {args.load_tests} tests: {load:.2f} s  (target <= 5 s)")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
