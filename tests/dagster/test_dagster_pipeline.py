"""The code location against a temporary SQLite instance: definitions, many-partition and
single-partition runs, metrics, insights, rollups with checks, leaderboard and comparison."""

from __future__ import annotations

import json

import pytest
from dagster import AssetKey, Definitions, RunConfig

from agent_health.stores import ResultKey
from definitions.defs.benchmark_assets import ComparisonConfig
from definitions.defs.partitions import multi_key, range_tags
from definitions.headless import QUIET, register

pytestmark = pytest.mark.filterwarnings("ignore")


def suite_of(pipeline, name):
    return next(s for s in pipeline.suites if s.suite == name)


def evaluate(pipeline, instance, suite, agents, tests=None):
    s = suite_of(pipeline, suite)
    tests = tests or list(instance.get_dynamic_partitions(s.names.tests_partitions))
    result = pipeline.defs.resolve_job_def(s.names.job).execute_in_process(
        instance=instance, tags=range_tags(agents, tests), run_config=QUIET
    )
    assert result.success
    return result


def partition_events(instance, key, run_id):
    records = instance.fetch_materializations(key, limit=1000).records
    return {r.partition_key: r.asset_materialization.metadata for r in records if r.run_id == run_id}


def check_evals(instance, key, name):
    from dagster import AssetCheckKey

    return instance.event_log_storage.get_asset_check_execution_history(AssetCheckKey(key, name), limit=10)


def test_definitions_load_validate_and_name_suites(make_pipeline):
    pipeline = make_pipeline()
    Definitions.validate_loadable(pipeline.defs)
    keys = {k.to_user_string() for k in pipeline.defs.resolve_asset_graph().get_all_asset_keys()}
    for prefix in ("rca/payments", "smoke_checks", "cases"):  # '/' nests, '-' is sanitized
        assert {f"{prefix}/{n}" for n in ("cases", "results", "metrics", "insights", "rollup")} <= keys
    assert {"benchmark/leaderboard", "benchmark/comparison"} <= keys
    graph = pipeline.defs.resolve_asset_graph()
    results = graph.get(AssetKey(["rca", "payments", "results"]))
    assert results.group_name == "suite_rca__payments" and results.backfill_policy.max_partitions_per_run is None
    assert results.pools == {"agent_health_agents"}
    assert AssetKey(["rca", "payments", "cases"]) in results.parent_keys
    rollup = graph.get(AssetKey(["rca", "payments", "rollup"]))
    assert {AssetKey(["rca", "payments", "metrics"]), AssetKey(["rca", "payments", "insights"])} == rollup.parent_keys
    assert AssetKey(["rca", "payments", "rollup"]) in graph.get(AssetKey(["benchmark", "leaderboard"])).parent_keys
    jobs = {j.name for j in pipeline.defs.resolve_all_job_defs()}
    assert {"evaluate__rca__payments", "evaluate__smoke_checks", "evaluate__cases", "rollups", "benchmark"} <= jobs
    repo = pipeline.defs.get_repository_def()
    assert {s.name for s in repo.sensor_defs} >= {"eval_files_sensor", "agent_versions_sensor"}
    assert {s.name for s in repo.schedule_defs} == {"nightly__rca__payments", "nightly__smoke_checks", "nightly__cases"}


def test_many_partitions_in_one_run_then_one_alone(make_pipeline, instance, project_dir):
    pipeline = make_pipeline()
    assert register(instance, pipeline) == []
    assert list(instance.get_dynamic_partitions("agent_versions")) == ["demo@v1", "demo@v2"]
    tests = list(instance.get_dynamic_partitions("tests__rca__payments"))
    assert tests == ["rca/payments::payment-rca-finds-the-database", "rca/payments::checkout-latency"]

    run = evaluate(pipeline, instance, "rca/payments", ["demo@v1", "demo@v2"])
    key = AssetKey(["rca", "payments", "results"])
    events = partition_events(instance, key, run.run_id)
    assert len(events) == 4  # every partition of the run has its own materialization ...
    for meta in events.values():  # ... with its own status, score, duration, tokens and cost
        assert {"status", "score", "duration_ms", "total_tokens", "cost_usd"} <= set(meta)
    v2_db = events[str(multi_key("demo@v2", tests[0]))]
    assert v2_db["status"].value == "passed" and v2_db["total_tokens"].value > 0 and v2_db["cost_usd"].value > 0
    assert events[str(multi_key("demo@v1", tests[1]))]["status"].value == "failed"
    store = pipeline.project.store
    assert len(store.list(suite="rca/payments")) == 4
    assert (project_dir / ".agent_health" / "results").is_dir()
    metrics = partition_events(instance, AssetKey(["rca", "payments", "metrics"]), run.run_id)
    assert len(metrics) == 4 and all("total_tokens" in m and "tool_calls" in m for m in metrics.values())
    insights = partition_events(instance, AssetKey(["rca", "payments", "insights"]), run.run_id)
    assert len(insights) == 4 and all("insights" in m for m in insights.values())
    [check] = check_evals(instance, key, "no_errored_tests")
    assert check.evaluation.passed

    # one partition alone goes through the same asset code and replaces exactly its result
    before = store.get(ResultKey("demo@v1", "smoke-checks", "smoke-checks::always-fails"))
    assert before is None
    s = suite_of(pipeline, "smoke-checks")
    one = pipeline.defs.resolve_job_def(s.names.job).execute_in_process(
        instance=instance, partition_key=str(multi_key("demo@v1", "smoke-checks::always-fails")), run_config=QUIET
    )
    assert one.success
    events = partition_events(instance, AssetKey(["smoke_checks", "results"]), one.run_id)
    assert list(events) == ["demo@v1|smoke-checks::always-fails"]
    assert events["demo@v1|smoke-checks::always-fails"]["status"].value == "failed"
    assert store.get(ResultKey("demo@v1", "smoke-checks", "smoke-checks::always-fails")).status == "failed"
    assert len(store.list()) == 5


def test_removed_test_partition_gets_an_errored_result_and_the_check_flags_it(make_pipeline, instance, project_dir):
    pipeline = make_pipeline()
    register(instance, pipeline)
    instance.add_dynamic_partitions("tests__smoke_checks", ["smoke-checks::gone"])
    run = evaluate(pipeline, instance, "smoke-checks", ["demo@v1"], ["smoke-checks::gone"])
    r = pipeline.project.store.get(ResultKey("demo@v1", "smoke-checks", "smoke-checks::gone"))
    assert r.status == "errored" and "smoke-checks.eval.py" in r.error
    [check] = check_evals(instance, AssetKey(["smoke_checks", "results"]), "no_errored_tests")
    assert not check.evaluation.passed and run.success


def test_rollups_checks_leaderboard_and_comparison(make_pipeline, instance, project_dir):
    pipeline = make_pipeline(min_pass_rate=0.5, max_errored_share=0.0)
    register(instance, pipeline)
    for s in pipeline.suites:
        evaluate(pipeline, instance, s.suite, ["demo@v1", "demo@v2"])
    rollups = pipeline.defs.resolve_job_def("rollups")
    for agent in ("demo@v1", "demo@v2"):
        assert rollups.execute_in_process(instance=instance, partition_key=agent, run_config=QUIET).success

    key = AssetKey(["cases", "rollup"])
    latest = {
        r.partition_key: r.asset_materialization.metadata
        for r in instance.fetch_materializations(key, limit=10).records
    }
    assert latest["demo@v1"]["pass_rate"].value == 0.0 and latest["demo@v2"]["pass_rate"].value == 1.0
    assert "latency_p95_ms" in latest["demo@v2"] and "cost_usd" in latest["demo@v2"]
    assert "cases::queue-backlog" in latest["demo@v1"]["summary"].value
    history = check_evals(instance, key, "pass_rate_threshold")
    assert sorted(h.evaluation.passed for h in history) == [False, True]  # v1 at 0% fails, v2 at 100% passes
    assert all(h.evaluation.passed for h in check_evals(instance, key, "errored_share_threshold"))
    regression = check_evals(instance, key, "no_regression")
    assert len(regression) == 2 and all(h.evaluation.passed for h in regression)  # v2 only fixes tests

    # a failing regression check names the flipped test: compare v1 against v2 as the baseline
    strict = make_pipeline(baseline="demo@v2", min_pass_rate=0.0)
    assert (
        strict.defs.resolve_job_def("rollups")
        .execute_in_process(instance=instance, partition_key="demo@v1", run_config=QUIET)
        .success
    )
    newest = check_evals(instance, key, "no_regression")[0].evaluation
    assert not newest.passed and "cases::queue-backlog" in newest.description
    assert check_evals(instance, key, "pass_rate_threshold")[0].evaluation.passed  # threshold 0 passes

    bench = pipeline.defs.resolve_job_def("benchmark").execute_in_process(
        instance=instance,
        run_config=RunConfig(ops={"benchmark__comparison": ComparisonConfig()}, loggers=QUIET["loggers"]),
    )
    assert bench.success
    board = instance.get_latest_materialization_event(AssetKey(["benchmark", "leaderboard"]))
    table = board.asset_materialization.metadata["leaderboard"].value
    assert "| demo@v2 | * |" in table and "| demo@v1 | rca/payments |" in table
    cmp = instance.get_latest_materialization_event(AssetKey(["benchmark", "comparison"])).asset_materialization
    assert cmp.metadata["baseline"].value == "demo@v1" and cmp.metadata["candidate"].value == "demo@v2"
    assert cmp.metadata["fixed"].value == 1 and cmp.metadata["regressed"].value == 0
    saved = json.loads((project_dir / ".agent_health" / "benchmark" / "comparison.json").read_text())
    assert saved["tests"][0]["test_id"] == "cases::queue-backlog" and saved["tests"][0]["flip"] == "fixed"


def test_comparison_needs_two_versions(make_pipeline, instance):
    pipeline = make_pipeline()
    instance.add_dynamic_partitions("agent_versions", ["demo@v1"])
    result = pipeline.defs.resolve_job_def("benchmark").execute_in_process(
        instance=instance, raise_on_error=False, run_config=QUIET
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "comparison needs two agent versions" in failure.step_failure_data.error.message


def test_max_partitions_per_run_is_configurable(make_pipeline, monkeypatch):
    monkeypatch.setenv("AGENT_HEALTH_MAX_PARTITIONS_PER_RUN", "50")
    node = make_pipeline().defs.resolve_asset_graph().get(AssetKey(["cases", "results"]))
    assert node.backfill_policy.max_partitions_per_run == 50
    monkeypatch.setenv("AGENT_HEALTH_MAX_PARTITIONS_PER_RUN", "many")
    with pytest.raises(ValueError, match="AGENT_HEALTH_MAX_PARTITIONS_PER_RUN must be a positive integer"):
        make_pipeline()


def test_a_broken_eval_file_fails_the_run_naming_the_file(make_pipeline, instance, project_dir):
    pipeline = make_pipeline()
    register(instance, pipeline)
    (project_dir / "evals" / "smoke-checks.eval.py").write_text("def broken(:\n")
    s = suite_of(pipeline, "smoke-checks")
    result = pipeline.defs.resolve_job_def(s.names.job).execute_in_process(
        instance=instance, partition_key="demo@v1|smoke-checks::pure-data-check", run_config=QUIET, raise_on_error=False
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "smoke-checks.eval.py" in failure.step_failure_data.error.message
    assert pipeline.project.store.list() == []  # nothing half-written
