"""The pooled SQLite event log: same files and results as Dagster's stock one, readable by it."""

from __future__ import annotations

import pytest
from dagster import AssetKey, DagsterInstance

from definitions.defs.partitions import range_tags
from definitions.headless import QUIET, instance_yaml, register
from definitions.storage import PooledSqliteEventLogStorage

pytestmark = pytest.mark.filterwarnings("ignore")


def test_pooled_event_log_records_every_partition_and_stays_compatible(make_pipeline, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(instance_yaml(home, pooled=True))
    pipeline = make_pipeline()
    s = next(x for x in pipeline.suites if x.suite == "rca/payments")
    with DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.event_log_storage, PooledSqliteEventLogStorage)
        register(instance, pipeline)
        tests = list(instance.get_dynamic_partitions(s.names.tests_partitions))
        run = pipeline.defs.resolve_job_def(s.names.job).execute_in_process(
            instance=instance, tags=range_tags(["demo@v1", "demo@v2"], tests), run_config=QUIET
        )
        assert run.success
        # many runs: engines for old run shards are evicted, not leaked
        for _ in range(3):
            assert (
                pipeline.defs.resolve_job_def(s.names.job)
                .execute_in_process(instance=instance, tags=range_tags(["demo@v1"], tests[:1]), run_config=QUIET)
                .success
            )
        assert len(instance.event_log_storage._engines) <= 16
    (home / "dagster.yaml").write_text(instance_yaml(home, pooled=False))  # the stock storage reads it back
    with DagsterInstance.from_config(str(home)) as stock:
        assert not isinstance(stock.event_log_storage, PooledSqliteEventLogStorage)
        records = stock.fetch_materializations(AssetKey(["rca", "payments", "results"]), limit=100).records
        first = {r.partition_key for r in records if r.run_id == run.run_id}
        assert first == {f"{a}|{t}" for a in ("demo@v1", "demo@v2") for t in tests}
        assert all("status" in r.asset_materialization.metadata for r in records)
        assert len(stock.get_runs()) == 4
