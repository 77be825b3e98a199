"""Deleting an agent version is an explicit command; the sensor never does it."""

from __future__ import annotations

from agent_health_dagster.headless import register
from agent_health_dagster.manage import delete_version
from tests.dagster.test_dagster_pipeline import evaluate


def test_delete_version_removes_the_partition_and_only_purges_results_when_asked(make_pipeline, instance):
    pipeline = make_pipeline()
    register(instance, pipeline)
    evaluate(pipeline, instance, "cases", ["demo@v1", "demo@v2"])
    store = pipeline.project.store
    assert delete_version(instance, pipeline.project, "demo@v1") == (True, 0)
    assert "demo@v1" not in instance.get_dynamic_partitions("agent_versions")
    assert len(store.list(agent="demo@v1")) == 1  # results kept
    assert delete_version(instance, pipeline.project, "demo@v2", purge_results=True) == (True, 1)
    assert store.list(agent="demo@v2") == []
    assert delete_version(instance, pipeline.project, "demo@v9") == (False, 0)
