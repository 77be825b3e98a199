"""Two run workers, as on two machines: their own state folders and Dagster homes, one PostgreSQL
instance (deploy/postgres/dagster.yaml) and one S3 store (moto). A backfill split into runs of
at most two partitions goes to them in turn; then each refreshes one version (rollups, the
comparison against the older version, the leaderboard).
Every figure matches a single-machine run (SQLite, local files) of the same tests, apart from
the timings (latency), which no two runs share.

Driven through public entry points only: `dagster job execute` subprocesses, and the headless
job (`python -m agent_health_dagster.headless`) for the single machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_health.config import Config
from agent_health.model import StoreSettings
from agent_health.stores import LocalResultStore, open_store
from tests.conftest import ROOT
from tests.deploy.conftest import TEMPLATE
from tests.evalkit import write_config, write_evals
from tests.support.dagster_plan import DAGSTER, register_partitions
from tests.support.postgres import fresh_database
from tests.support.s3 import new_bucket
from tests.support.timing import scaled

PER_RUN = 2  # partitions per run: the bound of the split backfill


FIGURES = """
import json
from dagster import AssetKey, AssetRecordsFilter, DagsterInstance, TableMetadataValue

def value(v):  # a table's rows as dicts; every other metadata value as itself
    return [dict(r.data) for r in v.records] if isinstance(v, TableMetadataValue) else v.value

with DagsterInstance.get() as instance:
    out = {}
    for key in instance.get_asset_keys():
        records = instance.fetch_materializations(AssetRecordsFilter(asset_key=key), limit=1000).records
        latest = {}
        for rec in sorted(records, key=lambda r: r.storage_id):
            mat = rec.asset_materialization
            latest[mat.partition or ""] = {k: value(v) for k, v in mat.metadata.items()}
        if key.path[-1] in ("rollup", "leaderboard", "comparison"):
            out["/".join(key.path)] = latest
    print(json.dumps(out, default=str))
"""


def comparable(figures: dict[str, Any]) -> dict[str, Any]:
    """Every figure but timings, in plain values and in table rows."""

    def keep(name: str) -> bool:
        return "latency" not in name and not name.endswith("_ms") and not name.startswith("p95")

    def clean(value: Any) -> Any:
        if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
            return [{k: v for k, v in row.items() if keep(k)} for row in value]
        return value

    return {
        asset: {part: {k: clean(v) for k, v in meta.items() if keep(k)} for part, meta in parts.items()}
        for asset, parts in figures.items()
    }


def python(code: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=scaled(300)
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def dagster_job(env: dict[str, str], job: str, config: Path, tags: dict[str, str] | None = None) -> None:
    cmd = [
        DAGSTER,
        "job",
        "execute",
        "-m",
        "agent_health_dagster.definitions",
        "-a",
        "defs",
        "-j",
        job,
        "-c",
        str(config),
    ]
    if tags:
        cmd += ["--tags", json.dumps(tags)]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=scaled(300))
    assert out.returncode == 0, f"{job} {tags}: {(out.stdout + out.stderr)[-3000:]}"


@pytest.mark.slow
def test_two_workers_on_postgres_and_s3_give_the_figures_of_one_machine(tmp_path, postgres, s3_endpoint):
    from agent_health_dagster.defs.partitions import range_tags

    agents = ["demo@v1", "demo@v2"]
    store = StoreSettings(
        type="s3", settings={"bucket": new_bucket(s3_endpoint), "prefix": "team", "endpoint_url": s3_endpoint}
    )
    code = tmp_path / "code"  # the same code image on every machine
    write_evals(code)
    (code / "agent_health_config.py").write_text(
        f"from agent_health import define_config\nconfig = define_config(store={store.model_dump()!r})\n"
    )
    db = fresh_database(postgres, "dagster_multi")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_HEALTH_", "DAGSTER_"))}
    base.update(PYTHONPATH=str(ROOT), AGENT_HEALTH_MAX_PARTITIONS_PER_RUN=str(PER_RUN), **db.env())

    def worker(name: str) -> dict[str, str]:
        home = tmp_path / name / "dagster_home"
        home.mkdir(parents=True)
        shutil.copy(TEMPLATE, home / "dagster.yaml")
        return {
            **base,
            "DAGSTER_HOME": str(home),
            "AGENT_HEALTH_CONFIG": str(code / "agent_health_config.py"),
            "AGENT_HEALTH_EVAL_ROOT": str(code / "evals"),
            "AGENT_HEALTH_STATE_DIR": str(tmp_path / name / "state"),
        }

    workers = [worker("machine-a"), worker("machine-b")]
    in_process = tmp_path / "in_process.yaml"
    in_process.write_text(
        "execution:\n  config:\n    in_process: {}\nloggers:\n  console:\n    config:\n      log_level: WARNING\n"
    )
    plan = register_partitions(workers[0])
    assert plan["problems"] == [] and plan["suites"]

    runs = [
        (job, range_tags([agent], tests[i : i + PER_RUN]))
        for job, tests in sorted(plan["suites"].items())
        for agent in agents
        for i in range(0, len(tests), PER_RUN)
    ]
    assert len(runs) >= 6
    for n, (job, tags) in enumerate(runs):
        dagster_job(workers[n % 2], job, in_process, tags)
    for n, agent in enumerate(agents):  # each worker refreshes from results the other one wrote too
        dagster_job(workers[n % 2], "refresh", in_process, {"dagster/partition": agent})
    shared_figures = json.loads(python(FIGURES, workers[0]))

    # The same tests on one machine: SQLite instance, local result files, the headless job.
    single = tmp_path / "single"
    write_evals(single)
    write_config(single)
    env = {
        **{k: v for k, v in base.items() if not k.startswith("DAGSTER_PG_")},
        "AGENT_HEALTH_CONFIG": str(single / "agent_health_config.py"),
        "AGENT_HEALTH_EVAL_ROOT": str(single / "evals"),
        "AGENT_HEALTH_STATE_DIR": str(single / "state"),
        "DAGSTER_HOME": str(single / "dagster_home"),
    }
    out = subprocess.run(
        [sys.executable, "-m", "agent_health_dagster.headless", "--agents", ",".join(agents)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(600),
    )
    assert out.returncode in (0, 1) and "Checks:" in out.stdout, out.stderr[-3000:]  # 1: a check failed
    single_figures = json.loads(python(FIGURES, env))

    assert set(shared_figures) == set(single_figures) and len(shared_figures) >= 3
    figures = comparable(shared_figures)
    assert figures == comparable(single_figures)
    for asset, parts in figures.items():  # the comparison really covers the headline figures
        if asset.endswith("rollup"):
            assert sorted(parts) == agents and all(
                {"total", "passed", "pass_rate_pct", "total_tokens"} <= set(m) for m in parts.values()
            ), parts
    assert {"regressed", "fixed", "tests", "pass_rate_delta_pct"} <= set(figures["benchmark/comparison"][agents[1]])
    assert figures["benchmark/comparison"][agents[1]]["baseline"] == agents[0]
    rollups = [p for a, parts in shared_figures.items() if a.endswith("rollup") for p in parts.values()]
    assert rollups and all(r["missing_results"] == 0 for r in rollups)

    # Every stored result too: the S3 store both workers wrote, against the local files.
    shared_store = open_store(Config(root=str(code)), store)
    local_store = LocalResultStore(single / "state" / "results")
    keys = shared_store.list()
    assert keys == local_store.list() and len(keys) == sum(len(t) for t in plan["suites"].values()) * len(agents)
    for a, b in zip(shared_store.get_many(keys), local_store.get_many(keys)):
        assert (a.status, a.score, a.usage.total_tokens, a.cost_usd, a.error) == (
            b.status,
            b.score,
            b.usage.total_tokens,
            b.cost_usd,
            b.error,
        ), a.test_id
        assert [(s.name, s.passed, s.score) for s in a.signals] == [(s.name, s.passed, s.score) for s in b.signals]
    for name in ("machine-a", "machine-b"):  # nothing went to a worker's own result files
        assert not (tmp_path / name / "state" / "results").exists()
