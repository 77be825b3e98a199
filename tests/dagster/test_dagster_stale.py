"""Staleness in Dagster tells the truth: a results partition is stale exactly when its test's
definition changed (the `cases` data version per test), or its agent version's settings or the
judge settings changed (the `agents/settings` data version per version). Uses the stale status
resolver the Dagster UI uses (an internal API, in this test only)."""

import json

import pytest
from dagster import AssetKey
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._time import get_current_datetime

from agent_health_dagster.defs.automation import sync_agent_versions, sync_eval_files
from agent_health_dagster.defs.partitions import multi_key
from agent_health_dagster.headless import apply_sensor_result, register
from tests.dagster.test_dagster_pipeline import evaluate

pytestmark = pytest.mark.filterwarnings("ignore")

HELPERS = """
from agent_health import test, expect

NEEDLE = "search_logs"


def used_by_a(result):
    return result.tool_calls(NEEDLE)


@test("a", prompt="Diagnose why the payment service is failing.")
async def a(agent):
    result = await agent.run()
    expect(len(used_by_a(result))).to_be_greater_than(0)


@test("b", prompt="Why is checkout slow? p99 latency is up.")
async def b(agent):
    result = await agent.run()
    expect(result.output).to_be_truthy()
"""


def stale_status(pipeline, instance, key, agent, test):
    graph = pipeline.defs.resolve_asset_graph()
    view = AssetGraphView(
        temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
        instance=instance,
        asset_graph=graph,
    )
    resolver = CachingStaleStatusResolver(instance=instance, asset_graph=graph, loading_context=view)
    return resolver.get_status(key, multi_key(agent, test))


def sync(pipeline, instance, cursor):
    result, problems = sync_eval_files(instance, pipeline.project, pipeline.suites, cursor)
    assert not problems
    apply_sensor_result(instance, result)
    return json.loads(result.cursor)


def test_changing_a_helper_only_one_test_uses_marks_only_that_test_stale(make_pipeline, instance, project_dir):
    path = project_dir / "evals" / "helpers.eval.py"
    path.write_text(HELPERS)
    pipeline = make_pipeline()
    register(instance, pipeline)
    cursor = sync(pipeline, instance, {})
    evaluate(pipeline, instance, "helpers", ["demo@v1", "demo@v2"])
    key = AssetKey(["helpers", "results"])
    a, b = "a", "b"

    def status(agent, test):
        return stale_status(pipeline, instance, key, agent, test)

    assert {status(v, t) for v in ("demo@v1", "demo@v2") for t in (a, b)} == {StaleStatus.FRESH}
    path.write_text(
        HELPERS.replace("# nothing", "").replace("def used_by_a(result):", "def used_by_a(result):\n    # why")
    )
    cursor = sync(pipeline, instance, cursor)  # a comment: nothing is stale
    assert {status(v, t) for v in ("demo@v1", "demo@v2") for t in (a, b)} == {StaleStatus.FRESH}
    path.write_text(HELPERS.replace("return result.tool_calls(NEEDLE)", "return result.tool_calls('get_metrics')"))
    cursor = sync(pipeline, instance, cursor)
    assert status("demo@v1", a) == status("demo@v2", a) == StaleStatus.STALE
    assert status("demo@v1", b) == status("demo@v2", b) == StaleStatus.FRESH
    # re-running the stale one makes it fresh again
    evaluate(pipeline, instance, "helpers", ["demo@v1", "demo@v2"], [a])
    assert status("demo@v2", a) == StaleStatus.FRESH


def test_changed_test_in_a_file_registered_earlier_shows_its_results_as_stale(make_pipeline, instance, project_dir):
    pipeline = make_pipeline()
    register(instance, pipeline)
    first = sync(pipeline, instance, {})
    evaluate(pipeline, instance, "rca/payments", ["demo@v1", "demo@v2"])
    key = AssetKey(["rca", "payments", "results"])
    tests = list(instance.get_dynamic_partitions("tests__rca__payments"))
    assert stale_status(pipeline, instance, key, "demo@v2", tests[1]) == StaleStatus.FRESH
    path = project_dir / "evals" / "rca" / "payments.eval.py"
    path.write_text(
        path.read_text().replace('to_have_called_tool("query_metrics")', 'to_have_called_tool("get_metrics")')
    )
    sync(pipeline, instance, first)
    assert stale_status(pipeline, instance, key, "demo@v2", tests[1]) == StaleStatus.STALE
    assert stale_status(pipeline, instance, key, "demo@v1", tests[1]) == StaleStatus.STALE
    assert stale_status(pipeline, instance, key, "demo@v2", tests[0]) == StaleStatus.FRESH


CONFIG = """
from agent_health import AgentSpec, define_config
config = define_config(
    agents=[AgentSpec(key="bot", connector="demo", settings={{"latency_ms": {latency}}},
                      versions={{"v1": {{}}, "v2": {{}}}})],
    judge={{"provider": "demo", "model": {model!r}}},
)
"""


def test_agent_and_judge_settings_feed_the_results_data_version(make_pipeline, instance, project_dir):
    config = project_dir / "agent_health_config.py"
    config.write_text(CONFIG.format(latency=0, model="demo:m1"))
    pipeline = make_pipeline()
    register(instance, pipeline)
    evaluate(pipeline, instance, "cases", ["bot@v1", "bot@v2"])
    key = AssetKey(["cases", "results"])
    test = "queue-backlog"

    def status(agent):
        return stale_status(pipeline, instance, key, agent, test)

    def resync(**values):
        config.write_text(CONFIG.format(**values))
        p = make_pipeline()
        apply_sensor_result(instance, sync_agent_versions(instance, p.project, p.suites))

    assert status("bot@v1") == status("bot@v2") == StaleStatus.FRESH
    resync(latency=0, model="demo:m1")  # nothing changed: nothing reported, nothing stale
    assert status("bot@v1") == status("bot@v2") == StaleStatus.FRESH
    resync(latency=5, model="demo:m1")  # the agent's settings changed: its versions' results are stale
    assert status("bot@v1") == status("bot@v2") == StaleStatus.STALE
    evaluate(pipeline, instance, "cases", ["bot@v1", "bot@v2"])
    assert status("bot@v1") == StaleStatus.FRESH
    resync(latency=5, model="demo:m2")  # the judge model changed: every result is stale
    assert status("bot@v1") == status("bot@v2") == StaleStatus.STALE
    # ... and what a person sees: the rollup says its results are out of date, naming why
    seen = latest_check(instance, AssetKey(["cases", "rollup"]), "up_to_date").evaluation
    assert not seen.passed and "bot@v1, bot@v2 (agent or judge) changed" in seen.description
    from agent_health_dagster.defs.partitions import version_range_tags
    from agent_health_dagster.headless import QUIET

    refresh = make_pipeline().defs.resolve_job_def("refresh")
    tags = version_range_tags(["bot@v1", "bot@v2"])
    assert refresh.execute_in_process(instance=instance, tags=tags, run_config=QUIET).success
    left = latest_check(instance, AssetKey(["cases", "rollup"]), "up_to_date").evaluation
    assert not left.passed and "judge settings changed" in left.description  # not rerun yet: still says so


def latest_check(instance, key, name, partition=None):
    from dagster import AssetCheckKey

    history = instance.event_log_storage.get_asset_check_execution_history(AssetCheckKey(key, name), limit=50)
    return next(h for h in history if h.evaluation is not None and h.partition == partition)


def test_everything_downstream_of_a_changed_test_says_it_is_out_of_date_until_the_rerun(
    make_pipeline, instance, project_dir
):
    """What a person sees, where Dagster shows no stale badge (partitioned assets): the up_to_date
    check of the rollup, the comparison and the leaderboard fails (WARN) from the sensor tick that
    saw the change until the refresh after the rerun, then passes."""
    from agent_health_dagster.defs.partitions import version_range_tags
    from agent_health_dagster.headless import QUIET

    path = project_dir / "evals" / "helpers.eval.py"
    path.write_text(HELPERS)
    pipeline = make_pipeline()
    register(instance, pipeline)
    cursor = sync(pipeline, instance, {})
    agents = ["demo@v1", "demo@v2"]
    s = next(x for x in pipeline.suites if x.suite == "helpers")
    evaluate(pipeline, instance, "helpers", agents)
    refresh = pipeline.defs.resolve_job_def("refresh")
    assert refresh.execute_in_process(instance=instance, tags=version_range_tags(agents), run_config=QUIET).success
    rollup, comparison, board = (
        s.key("rollup"),
        AssetKey(["benchmark", "comparison"]),
        AssetKey(["benchmark", "leaderboard"]),
    )
    checks = [(rollup, None), (comparison, None), (board, None)]
    assert all(latest_check(instance, k, "up_to_date", p).evaluation.passed for k, p in checks)

    path.write_text(HELPERS.replace('NEEDLE = "search_logs"', 'NEEDLE = "query_metrics"'))  # test a changes
    sync(pipeline, instance, cursor)
    for k, p in checks:
        seen = latest_check(instance, k, "up_to_date", p).evaluation
        assert not seen.passed and seen.severity.value == "WARN"
        assert "helpers::a (test definition changed)" in seen.description

    # the rerun alone is not enough: the refresh after it brings them up to date
    evaluate(pipeline, instance, "helpers", agents, ["a"])
    assert refresh.execute_in_process(instance=instance, tags=version_range_tags(agents), run_config=QUIET).success
    assert all(latest_check(instance, k, "up_to_date", p).evaluation.passed for k, p in checks)

    # a rerun of one version only leaves the other one out of date, by name
    path.write_text(HELPERS.replace('NEEDLE = "search_logs"', 'NEEDLE = "get_metrics"'))
    evaluate(pipeline, instance, "helpers", ["demo@v1"], ["a"])
    assert refresh.execute_in_process(instance=instance, tags=version_range_tags(agents), run_config=QUIET).success
    left = latest_check(instance, rollup, "up_to_date").evaluation
    assert not left.passed and "demo@v2: helpers::a" in left.description
    assert "demo@v1" not in left.description and "helpers::b" not in left.description
