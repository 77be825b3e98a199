"""A changed test shows its results as stale in Dagster (the `cases` data version per test feeds
the results' staleness), while the results of unchanged tests stay fresh. Uses the same stale
status resolver the Dagster UI uses (an internal API)."""

import json

import pytest
from dagster import AssetKey
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._time import get_current_datetime

from definitions.defs.automation import sync_eval_files
from definitions.defs.partitions import multi_key
from definitions.headless import apply_sensor_result, register
from tests.dagster.test_dagster_pipeline import evaluate

pytestmark = pytest.mark.filterwarnings("ignore")


def test_changed_test_shows_its_results_as_stale(make_pipeline, instance, project_dir):
    pipeline = make_pipeline()
    register(instance, pipeline)
    first, _ = sync_eval_files(instance, pipeline.project, pipeline.suites, {})
    evaluate(pipeline, instance, "rca/payments", ["demo@v1", "demo@v2"])
    key = AssetKey(["rca", "payments", "results"])
    tests = list(instance.get_dynamic_partitions("tests__rca__payments"))

    def status(agent, test):
        graph = pipeline.defs.resolve_asset_graph()
        view = AssetGraphView(
            temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
            instance=instance,
            asset_graph=graph,
        )
        resolver = CachingStaleStatusResolver(instance=instance, asset_graph=graph, loading_context=view)
        return resolver.get_status(key, multi_key(agent, test))

    assert status("demo@v2", tests[1]) == StaleStatus.FRESH
    path = project_dir / "evals" / "rca" / "payments.eval.py"
    path.write_text(
        path.read_text().replace('to_have_called_tool("query_metrics")', 'to_have_called_tool("get_metrics")')
    )
    result, problems = sync_eval_files(instance, pipeline.project, pipeline.suites, json.loads(first.cursor))
    assert not problems
    apply_sensor_result(instance, result)
    assert status("demo@v2", tests[1]) == StaleStatus.STALE
    assert status("demo@v1", tests[1]) == StaleStatus.STALE
    assert status("demo@v2", tests[0]) == StaleStatus.FRESH
