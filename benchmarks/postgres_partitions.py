"""Benchmark: the evaluation step's Dagster bookkeeping on a PostgreSQL instance with the S3 result
store, directly and through PgBouncer -- the same measurement as benchmarks/dagster_materialize.py
(`measure_step`: the results+metrics+insights step over N partitions in runs of at most K).

    python benchmarks/postgres_partitions.py [--tests 5000] [--per-run K] [--paths direct,session,transaction]
        [--stock-dagster-env] [--profile PREFIX]

Starts a PostgreSQL (Debian's package), PgBouncer in front of it (session and transaction pooling)
and a moto S3 server, all on 127.0.0.1; each path gets a fresh database and the documented
deploy/postgres/dagster.yaml. Prints, per path, the figures of `measure_step`: Dagster's
bookkeeping per partition = (run wall - engine wall) / N (target at most 5 ms with the S3 store,
issue 13; at most 10 ms on PostgreSQL, issue 14), and the events, SQL connections and statements
per partition. dagster-postgres opens a connection per statement (NullPool): without a pooler,
connection setup is most of the bookkeeping."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import uuid
import warnings
from pathlib import Path

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
    time_engine_calls,
    write_project,
)

from tests.support.postgres import Postgres, fresh_database, running_pgbouncer, running_postgres  # noqa: E402
from tests.support.s3 import moto_server_process  # noqa: E402

PATHS = ("direct", "session", "transaction")


def measure(label: str, root: Path, db: Postgres, agent: str, per_run: int | None, profile: str | None) -> None:
    """One path: a fresh instance in `root` on `db`, the tests registered, the step measured."""
    from dagster import DagsterInstance

    from agent_health_dagster.defs.build import build_pipeline

    home = postgres_home(root, db.env())
    pipeline = build_pipeline()
    with DagsterInstance.get() as instance, time_engine_calls() as engine:
        registration = register_tests(instance, pipeline)
        figures = measure_step(instance, pipeline, agent, per_run, engine, profile)
    print(f"\n== {label} (DAGSTER_HOME {home}; registration {registration:.2f} s)")
    print(figures.report(5), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=5000)
    parser.add_argument("--agent", default="demo@v2")
    parser.add_argument("--per-run", type=int, help="Partitions per run (0: one run; default: the code location's).")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"Comma-separated, of {', '.join(PATHS)}.")
    parser.add_argument("--stock-dagster-env", action="store_true", help="Without the deployment's Dagster settings.")
    parser.add_argument("--profile", metavar="PREFIX", help="cProfile each path's measured runs into PREFIX.<path>.")
    args = parser.parse_args()
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    if unknown := set(paths) - set(PATHS):
        parser.error(f"unknown path(s) {', '.join(sorted(unknown))}; choose from {', '.join(PATHS)}")
    settings = dagster_settings(args.stock_dagster_env)
    root = Path(tempfile.mkdtemp(prefix="ah-bench-pg-"))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    try:
        with contextlib.ExitStack() as stack:
            endpoint = stack.enter_context(moto_server_process())
            import boto3

            bucket = f"ah-bench-{uuid.uuid4().hex[:8]}"
            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
            store = {"type": "s3", "settings": {"bucket": bucket, "prefix": "bench", "endpoint_url": endpoint}}
            os.environ["AGENT_HEALTH_CONFIG"] = str(write_project(root / "project", 1, args.tests, store))
            os.environ["AGENT_HEALTH_STATE_DIR"] = str(root / "state")
            per_run = per_run_limit(args.per_run)

            def folder(prefix: str) -> Path:
                # Reachable by the postgres user when we run as root: not under `root`.
                path = tempfile.mkdtemp(prefix=prefix)
                stack.callback(shutil.rmtree, path, True)
                return Path(path)

            pg = stack.enter_context(running_postgres(folder("ah-bench-pgdata-")))
            via = {"direct": pg}
            for mode in ("session", "transaction"):
                if mode in paths:
                    via[mode] = stack.enter_context(
                        running_pgbouncer(pg, folder(f"ah-bench-pgbouncer-{mode}-"), pool_mode=mode)
                    )
            print(
                f"PostgreSQL on {pg.host}:{pg.port}, "
                + ", ".join(f"PgBouncer ({m} pooling) on {via[m].port}" for m in via if m != "direct")
                + f", S3 (moto) at {endpoint}; {args.tests} partitions, runs of at most {per_run or 'all'}; "
                f"{settings}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
                flush=True,
            )
            for i, path in enumerate(paths):
                db = fresh_database(pg, f"bench_{path}")
                server = via[path]
                target = Postgres(server.host, server.port, db.db, db.user)
                label = "PostgreSQL directly" if path == "direct" else f"through PgBouncer, {path} pooling"
                profile = f"{args.profile}.{path}" if args.profile else None
                measure(label, root / f"home-{i}-{path}", target, args.agent, per_run, profile)
            print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
