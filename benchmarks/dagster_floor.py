"""Benchmark: our Dagster bookkeeping per test partition against Dagster's own floor for the same
events, and the public routes for a partition's outcome, in one process, on the local default
(SQLite), on PostgreSQL directly and through PgBouncer.

    python benchmarks/dagster_floor.py [--tests 1000] [--per-run K] [--small-runs 0]
        [--backends sqlite,postgres,pgbouncer] [--repeat 3]
        [--alternatives plain,metadata,log_materialization,runless,check,run_check]

Ours is the suite's evaluation step (the demo agent, zero latency, local result files) over N
partitions in runs of at most K (the code location's bound by default): Dagster's bookkeeping per
partition = (run wall - engine wall) / N, as benchmarks/dagster_materialize.py measures it. The
floor of the route we chose (`observe`) is a no-work asset with the same partitions definitions
(the same dynamic `agent_versions` and tests partitions, the same keys), run over the same
ranges, writing the same events per partition: one materialization per partition (the output,
written in batches), then one observation per partition carrying its outcome. Beside it, each a
route for the outcome (does the partition a person clicks show it; does staleness stay right):

- `plain`: one materialization per partition and no metadata: the least any route writes (no
  outcome on the page);
- `metadata`: the outcome as the materialization's metadata through
  `add_asset_metadata(partition_key=...)` (what the pipeline wrote before);
- `log_materialization`: one `AssetMaterialization` per partition logged by hand, no output (no
  data provenance: results never go stale);
- `runless`: the outcome reported after the run, one runless materialization per partition (no
  run lineage, never stale);
- `check`: one materialization and one `test_outcome` check evaluation per partition (the page
  shows no outcome; the check's does);
- `run_check`: one materialization per partition and one check evaluation per run listing the
  failing partitions;
- `small runs`: ours and the floor in runs of at most `--small-runs` partitions.

Targets (issue 32), at 1,000 partitions per run, as ratios measured in one run: the chosen
route's floor at most 2x the plain floor on SQLite; ours at most 4 ms per partition through
PgBouncer (or 1.5x the plain floor there). Each backend gets a fresh instance (and a fresh
database); PostgreSQL and PgBouncer are started here (Debian's packages)."""

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
warnings.filterwarnings("ignore")

from dagster_materialize import (  # noqa: E402
    dagster_settings,
    measure_step,
    per_run_limit,
    postgres_home,
    register_tests,
    sqlite_home,
    time_engine_calls,
    write_project,
)

BACKENDS = ("sqlite", "postgres", "pgbouncer")
CHOSEN = "observe"
VARIANTS = (CHOSEN, "plain", "metadata", "log_materialization", "runless", "check", "run_check")
SHOWS = {  # does the partition page show the outcome; is staleness right; does it have run lineage
    "observe": ("yes", "right", "yes"),
    "plain": ("no", "right", "yes"),
    "metadata": ("yes", "right", "yes"),
    "log_materialization": ("yes", "never stale", "yes"),
    "runless": ("yes", "never stale", "no"),
    "check": ("no (the check's page)", "right", "yes"),
    "run_check": ("no (the check's page)", "right", "yes"),
}
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def outcome(i: int) -> dict[str, Any]:
    """A results partition's metadata as the pipeline writes it (same keys, same kinds of values)."""
    failed = i % 3 == 0
    meta: dict[str, Any] = {"status": "failed" if failed else "passed"}
    if failed:
        from dagster import MetadataValue

        meta["failure"] = MetadataValue.text("to_have_called_tool('query_metrics'): not called; called search_logs")
    return {
        **meta,
        "score": 0.5 if failed else 1.0,
        "duration_ms": 12.3 + i % 7,
        "total_tokens": 800 + i % 100,
        "cost_usd": 0.0004,
        "tool_calls": 2,
        "llm_calls": 1,
        "insights": 1,
        "insight_rules": "redundant_calls",
        "content_hash": f"{i:016x}",
        "harness_version": "0.1.0",
        "agent_settings_hash": "5f0c2a9e3b1d4c7a",
        "judges": "demo:heuristic",
    }


def floor_definitions(suite: Any, variants: tuple[str, ...]) -> Any:
    """No-work assets over the suite's own partitions, one per variant, each in its own job, with
    the results' own upstream assets (the suite's cases, the agents' settings): each materialization
    records the same data provenance as the pipeline's."""
    import dagster as dg

    from agent_health_dagster.defs.build import AGENT_SETTINGS

    multi = suite.results_def  # the suite's own definitions, by name
    assets: list[Any] = [suite.cases, AGENT_SETTINGS]
    jobs = []
    for variant in variants:
        key = dg.AssetKey(["floor", variant, "results"])
        checks = []
        if variant == "check":
            checks = [dg.AssetCheckSpec("test_outcome", asset=key, partitions_def=multi)]
        elif variant == "run_check":
            checks = [dg.AssetCheckSpec("failing_tests", asset=key)]
        assets.append(no_work_step(variant, key, multi, checks, [suite.cases.key, AGENT_SETTINGS.key]))
        jobs.append(dg.define_asset_job(f"floor_{variant}", selection=dg.AssetSelection.assets(key)))
    return dg.Definitions(assets=assets, jobs=jobs)


def no_work_step(variant: str, key: Any, multi: Any, checks: list[Any], deps: list[Any]) -> Any:
    import dagster as dg

    @dg.multi_asset(
        name=f"floor_{variant}",
        specs=[
            dg.AssetSpec(key, partitions_def=multi, deps=deps, skippable=variant in ("log_materialization", "runless"))
        ],
        check_specs=checks,
        partitions_def=multi,
        backfill_policy=dg.BackfillPolicy.single_run(),
    )
    def step(context: dg.AssetExecutionContext):
        keys = context.partition_keys
        metadata = PRECOMPUTED[: len(keys)]  # built before timing: the floor is Dagster's work only
        if variant == "metadata":
            for k, meta in zip(keys, metadata):
                context.add_asset_metadata(meta, asset_key=key, partition_key=k)
        if variant == "log_materialization":
            for k, meta in zip(keys, metadata):
                context.log_event(dg.AssetMaterialization(asset_key=key, partition=k, metadata=meta))
            return
        if variant == "runless":  # the run writes nothing; the benchmark reports after it
            return
        yield dg.MaterializeResult(asset_key=key)
        if variant == "observe":
            for k, meta in zip(keys, metadata):
                context.log_event(dg.AssetObservation(asset_key=key, partition=k, metadata=meta))
        if variant == "check":
            for k, meta in zip(keys, metadata):
                yield dg.AssetCheckEvaluation(
                    asset_key=key,
                    check_name="test_outcome",
                    passed=meta["status"] == "passed",
                    partition=k,
                    metadata=meta,
                    severity=dg.AssetCheckSeverity.WARN,
                )
            yield dg.Output(None, output_name=checks[0].get_python_identifier())
        if variant == "run_check":
            failing = [k for k, meta in zip(keys, metadata) if meta["status"] != "passed"]
            yield dg.AssetCheckResult(
                asset_key=key,
                check_name="failing_tests",
                passed=not failing,
                metadata={"failing": dg.MetadataValue.json(failing[:1000]), "count": len(failing)},
            )

    return step


PRECOMPUTED: list[dict[str, Any]] = []


@dataclass
class Row:
    label: str
    partitions: int
    runs: int
    per_partition_ms: float
    cpu_ms: float  # this process's CPU per partition (Dagster's part: the engine's is left out of ours)


def time_floor(instance: Any, defs: Any, variant: str, agent: str, tests: list[str], per_run: int | None) -> Row:
    from dagster import AssetKey, AssetMaterialization

    from agent_health_dagster.defs.partitions import bounded_ranges, multi_key, range_tags

    job = defs.resolve_job_def(f"floor_{variant}")
    job.execute_in_process(instance=instance, tags=range_tags([agent], tests[:1]), run_config=QUIET)  # warm-up
    ranges = bounded_ranges([agent], tests, per_run)
    key = AssetKey(["floor", variant, "results"])
    start, cpu = time.perf_counter(), time.process_time()
    for agents, chunk in ranges:
        assert job.execute_in_process(instance=instance, tags=range_tags(agents, chunk), run_config=QUIET).success
        if variant == "runless":  # reported after the run, one runless event per partition
            for t, meta in zip(chunk, PRECOMPUTED):
                instance.report_runless_asset_event(
                    AssetMaterialization(asset_key=key, partition=str(multi_key(agents[0], t)), metadata=meta)
                )
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return Row(f"floor: {variant}", len(tests), len(ranges), wall / len(tests) * 1000, cpu / len(tests) * 1000)


def measure_backend(
    label: str,
    home: Callable[[], Path],
    agent: str,
    per_run: int | None,
    small: int,
    repeat: int,
    target: float,
    variants: tuple[str, ...] = VARIANTS,
) -> list[Row]:
    """One backend: a fresh instance, the tests registered; ours, the chosen route's floor and the
    plain floor alternate (`repeat` times, so drift in load hits all three), then each other route."""
    from dagster import DagsterInstance

    from agent_health_dagster.defs.build import build_pipeline

    where = home()
    pipeline = build_pipeline()
    suite = pipeline.suites[0]
    defs = floor_definitions(suite, VARIANTS)
    rows: list[Row] = []
    with DagsterInstance.get() as instance, time_engine_calls() as engine:
        register_tests(instance, pipeline)
        tests = suite.test_keys(instance)
        PRECOMPUTED[:] = [outcome(i) for i in range(len(tests))]
        for _ in range(repeat):
            ours = measure_step(instance, pipeline, agent, per_run, engine)
            rows.append(Row("ours", ours.partitions, ours.runs, ours.bookkeeping_ms, ours.bookkeeping_cpu_ms))
            rows.append(time_floor(instance, defs, CHOSEN, agent, tests, per_run))
            rows.append(time_floor(instance, defs, "plain", agent, tests, per_run))
        for variant in variants:
            if variant not in (CHOSEN, "plain"):
                rows.append(time_floor(instance, defs, variant, agent, tests, per_run))
        if small and (per_run is None or small < per_run):
            ours = measure_step(instance, pipeline, agent, small, engine)
            rows.append(
                Row(f"ours, runs of {small}", ours.partitions, ours.runs, ours.bookkeeping_ms, ours.bookkeeping_cpu_ms)
            )
            floor = time_floor(instance, defs, CHOSEN, agent, tests, small)
            floor.label = f"floor: {CHOSEN}, runs of {small}"
            rows.append(floor)
    print(f"\n== {label} (DAGSTER_HOME {where}; load {' '.join(f'{x:.1f}' for x in os.getloadavg())})")
    print(report(rows, target, label.startswith("local")), flush=True)
    return rows


def report(rows: list[Row], target: float, sqlite: bool) -> str:
    def median(label: str, cpu: bool = False) -> float:
        return statistics.median(r.cpu_ms if cpu else r.per_partition_ms for r in rows if r.label == label)

    head = f"{'events per partition':30} {'partitions':>10} {'runs':>5} {'ms / partition':>15} {'CPU ms':>7}"
    lines = [head + "  page / staleness / lineage"]
    for r in rows:
        shows = SHOWS.get(r.label.removeprefix("floor: "))
        lines.append(
            f"{r.label:30} {r.partitions:>10} {r.runs:>5} {r.per_partition_ms:>15.2f} {r.cpu_ms:>7.2f}"
            + (f"  {' / '.join(shows)}" if shows and r.label.startswith("floor") else "")
        )
    ours, chosen, plain = median("ours"), median(f"floor: {CHOSEN}"), median("floor: plain")
    lines.append(
        f"medians: ours {ours:.2f} ms, the chosen route's floor {chosen:.2f} ms ({ours / chosen:.2f}x), the plain "
        f"floor {plain:.2f} ms: the chosen floor is {chosen / plain:.2f}x the plain floor, ours {ours / plain:.2f}x"
    )
    cpu_ours, cpu_chosen = median("ours", True), median(f"floor: {CHOSEN}", True)
    cpu_plain = median("floor: plain", True)
    lines.append(
        f"CPU: ours {cpu_ours:.2f} ms, the chosen floor {cpu_chosen:.2f} ms ({cpu_ours / cpu_chosen:.2f}x), "
        f"the plain floor {cpu_plain:.2f} ms ({cpu_ours / cpu_plain:.2f}x)"
    )
    if sqlite:
        lines.append(f"target: the chosen route at most 2x the plain floor: {'met' if ours / plain <= 2 else 'missed'}")
    else:
        met = ours <= target or ours <= 1.5 * plain
        lines.append(
            f"target: ours at most {target:g} ms (or 1.5x the plain floor, {1.5 * plain:.2f} ms): "
            + ("met" if met else "missed")
            + ("" if chosen <= target else f"; the chosen route's own floor ({chosen:.2f} ms) misses it too")
        )
    return "\n".join(lines)


@contextlib.contextmanager
def postgres_servers(backends: list[str]) -> Iterator[dict[str, Any]]:
    """A PostgreSQL and (when asked) a PgBouncer in session pooling in front of it."""
    from tests.support.postgres import running_pgbouncer, running_postgres

    with contextlib.ExitStack() as stack:

        def folder(prefix: str) -> Path:
            path = tempfile.mkdtemp(prefix=prefix)  # reachable by the postgres user when we run as root
            stack.callback(shutil.rmtree, path, True)
            return Path(path)

        servers: dict[str, Any] = {}
        if {"postgres", "pgbouncer"} & set(backends):
            servers["postgres"] = stack.enter_context(running_postgres(folder("ah-floor-pgdata-")))
        if "pgbouncer" in backends:
            servers["pgbouncer"] = stack.enter_context(
                running_pgbouncer(servers["postgres"], folder("ah-floor-pgbouncer-"), pool_mode="session")
            )
        yield servers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--agent", default="demo@v2")
    parser.add_argument("--per-run", type=int, help="Partitions per run (0: one run; default: the code location's).")
    parser.add_argument("--small-runs", type=int, default=0, help="Smaller runs measured beside (0: skip).")
    parser.add_argument("--backends", default=",".join(BACKENDS), help=f"Comma-separated, of {', '.join(BACKENDS)}.")
    parser.add_argument("--repeat", type=int, default=3, help="Times ours and the two floors alternate (medians).")
    parser.add_argument(
        "--alternatives",
        default=",".join(VARIANTS[2:]),
        help=f"Routes timed beside the chosen one and plain (of {', '.join(VARIANTS[2:])}; '' for none).",
    )
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if unknown := set(backends) - set(BACKENDS):
        parser.error(f"unknown backend(s) {', '.join(sorted(unknown))}; choose from {', '.join(BACKENDS)}")
    settings = dagster_settings(False)
    root = Path(tempfile.mkdtemp(prefix="ah-floor-"))
    os.environ["AGENT_HEALTH_CONFIG"] = str(write_project(root / "project", 1, args.tests))
    per_run = per_run_limit(args.per_run)
    print(f"{args.tests} partitions of one suite, agent {args.agent}, runs of at most {per_run or 'all'}; {settings}")
    try:
        with postgres_servers(backends) as servers:
            from tests.support.postgres import Postgres, fresh_database

            for i, backend in enumerate(backends):
                os.environ["AGENT_HEALTH_STATE_DIR"] = str(root / f"state-{i}")
                if backend == "sqlite":

                    def home(i: int = i) -> Path:
                        return sqlite_home(root / f"sqlite-{i}")

                    label, target = "local default (SQLite)", 0.0
                else:
                    db = fresh_database(servers["postgres"], f"floor_{backend}")
                    via = servers[backend]
                    pg = Postgres(via.host, via.port, db.db, db.user)

                    def home(i: int = i, pg: Postgres = pg) -> Path:
                        return postgres_home(root / f"pg-{i}", pg.env())

                    label = "PostgreSQL directly" if backend == "postgres" else "PostgreSQL through PgBouncer (session)"
                    target = 4.0
                others = tuple(v.strip() for v in args.alternatives.split(",") if v.strip() in VARIANTS)
                measure_backend(label, home, args.agent, per_run, args.small_runs, args.repeat, target, others)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
