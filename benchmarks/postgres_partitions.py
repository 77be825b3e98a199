"""Benchmark: N test partitions (default 5,000) of one suite in ONE Dagster run on a PostgreSQL
instance (deploy/postgres/dagster.yaml) with the S3 result store, directly and through PgBouncer.

    python benchmarks/postgres_partitions.py [--tests 5000]

Starts a PostgreSQL (Debian's package), a PgBouncer in front of it and a moto S3 server, all on
127.0.0.1. Prints, for each connection path, the results run end to end, the engine's time
inside it (agent runs and S3 writes), and Dagster's bookkeeping per partition (the difference
over N; target at most 5 ms). dagster-postgres opens a connection per statement (NullPool), so
connecting dominates without a pooler."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
warnings.filterwarnings("ignore")

from dagster_materialize import time_engine_calls, write_project  # noqa: E402

from tests.support.postgres import fresh_database, running_pgbouncer, running_postgres  # noqa: E402
from tests.support.s3 import moto_server_process  # noqa: E402


def measure(label: str, home: Path, pg, n: int, agent: str) -> tuple[float, float]:
    """One results run of `n` partitions on the instance in `home`: (end to end, engine in it)."""
    from dagster import DagsterInstance

    import definitions.defs.suite_assets as suite_assets
    from definitions.defs.build import build_pipeline
    from definitions.defs.partitions import range_tags
    from definitions.headless import QUIET, register

    home.mkdir(parents=True)
    shutil.copy(ROOT / "deploy" / "postgres" / "dagster.yaml", home / "dagster.yaml")
    os.environ.update({"DAGSTER_HOME": str(home), **pg.env()})
    real_run = suite_assets.run_partitions
    engine_time = time_engine_calls()
    try:
        pipeline = build_pipeline()
        suite = pipeline.suites[0]
        with DagsterInstance.get() as instance:
            register(instance, pipeline)
            tests = list(instance.get_dynamic_partitions(suite.names.tests_partitions))
            assert len(tests) == n, len(tests)
            job = pipeline.defs.get_implicit_global_asset_job_def().get_subset(asset_selection={suite.key("results")})
            job.execute_in_process(instance=instance, tags=range_tags([agent], tests[:1]), run_config=QUIET)  # warm-up
            engine_time.clear()
            start = time.perf_counter()
            result = job.execute_in_process(instance=instance, tags=range_tags([agent], tests), run_config=QUIET)
            total = time.perf_counter() - start
            assert result.success
    finally:
        suite_assets.run_partitions = real_run
    engine = sum(engine_time)
    print(
        f"{label}: {n} partitions in one run: {total:.1f} s end to end, engine (agent + S3 writes) {engine:.1f} s, "
        f"Dagster bookkeeping {(total - engine) / n * 1000:.2f} ms per partition  (target <= 5 ms)",
        flush=True,
    )
    return total, engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=5000)
    parser.add_argument("--agent", default="demo@v2")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ah-bench-pg-"))
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    try:
        with contextlib.ExitStack() as stack:
            endpoint = stack.enter_context(moto_server_process())
            import boto3

            bucket = f"ah-bench-{uuid.uuid4().hex[:8]}"
            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
            write_project(root / "project", args.tests)
            store = {"type": "s3", "settings": {"bucket": bucket, "prefix": "bench", "endpoint_url": endpoint}}
            (root / "project" / "agent_health_config.py").write_text(
                f"from agent_health import define_config\nconfig = define_config(concurrency=64, store={store!r})\n"
            )
            os.environ["AGENT_HEALTH_CONFIG"] = str(root / "project" / "agent_health_config.py")
            os.environ["AGENT_HEALTH_STATE_DIR"] = str(root / "state")
            # Their folders must be reachable by the postgres user when we run as root: not under `root`.
            for prefix in ("ah-bench-pgdata-", "ah-bench-pgbouncer-"):
                stack.callback(shutil.rmtree, folder := tempfile.mkdtemp(prefix=prefix), True)
                if prefix.endswith("pgdata-"):
                    pg = stack.enter_context(running_postgres(Path(folder)))
                else:
                    bouncer = stack.enter_context(running_pgbouncer(pg, Path(folder)))
            print(
                f"PostgreSQL on {pg.host}:{pg.port}, PgBouncer on {bouncer.port}, S3 (moto) at {endpoint}", flush=True
            )
            measure(
                "PostgreSQL directly", root / "home-direct", fresh_database(pg, "bench_direct"), args.tests, args.agent
            )
            db = fresh_database(pg, "bench_bouncer")
            via = type(bouncer)(bouncer.host, bouncer.port, db.db, db.user)
            measure("through PgBouncer", root / "home-bouncer", via, args.tests, args.agent)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
