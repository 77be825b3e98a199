"""The code location against a temporary SQLite instance: definitions, the one evaluation step
(many partitions in a run, one alone), each results partition's outcome observed after its
materialization, the per-version summaries (metrics, insights, rollup with partitioned checks) in
one refresh run per version, the leaderboard and the per-candidate comparison, and the run settings."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass

import pytest
from dagster import AssetCheckKey, AssetKey, AssetRecordsFilter, DagsterEventType, Definitions, TableMetadataValue

from agent_health.errors import ConfigError
from agent_health.stores import ResultKey
from agent_health_dagster.defs.partitions import multi_key, range_tags
from agent_health_dagster.headless import QUIET, register

pytestmark = pytest.mark.filterwarnings("ignore")


def suite_of(pipeline, name):
    return next(s for s in pipeline.suites if s.suite == name)


def evaluate(pipeline, instance, suite, agents, tests=None, run_config=None, raise_on_error=True):
    s = suite_of(pipeline, suite)
    tests = tests or list(instance.get_dynamic_partitions(s.names.tests_partitions))
    result = pipeline.defs.resolve_job_def(s.names.job).execute_in_process(
        instance=instance, tags=range_tags(agents, tests), run_config=run_config or QUIET, raise_on_error=raise_on_error
    )
    if raise_on_error:
        assert result.success
    return result


def materialized(instance, key, run_id):
    records = instance.fetch_materializations(key, limit=1000).records
    return {r.partition_key for r in records if r.run_id == run_id}


def outcomes(instance, key, run_id=None):
    """Each results partition's outcome as its page shows it: the metadata of the newest
    observation logged after the partition's newest materialization (of `run_id` when given)."""
    latest = {}
    for r in instance.fetch_materializations(key, limit=10_000).records:  # newest first
        latest.setdefault(r.partition_key, r.storage_id)
    out = {}
    for r in instance.fetch_observations(key, limit=10_000).records:  # newest first
        if (run_id and r.run_id != run_id) or r.partition_key in out:
            continue
        if r.storage_id > latest.get(r.partition_key, 0):
            out[r.partition_key] = r.asset_observation.metadata
    return out


def check_evals(instance, key, name, partition=None):
    history = instance.event_log_storage.get_asset_check_execution_history(AssetCheckKey(key, name), limit=50)
    return [h for h in history if partition is None or h.partition == partition]


def test_definitions_load_validate_and_name_suites(make_pipeline):
    pipeline = make_pipeline()
    Definitions.validate_loadable(pipeline.defs)
    graph = pipeline.defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    for prefix in ("rca/payments", "smoke_checks", "cases"):  # '/' nests, '-' is sanitized
        assert {f"{prefix}/{n}" for n in ("cases", "results", "metrics", "insights", "rollup")} <= keys
    assert {"benchmark/leaderboard", "benchmark/comparison", "agents/settings"} <= keys
    results = graph.get(AssetKey(["rca", "payments", "results"]))
    assert results.group_name == "suite_rca__payments" and results.backfill_policy.max_partitions_per_run == 1000
    assert results.pools == {"agent_health_agents"}
    assert results.parent_keys == {AssetKey(["rca", "payments", "cases"]), AssetKey(["agents", "settings"])}
    # the step that calls agents materializes results alone: one event per test partition
    evaluate_def = pipeline.defs.get_assets_def(AssetKey(["rca", "payments", "results"]))
    assert {k.to_user_string() for k in evaluate_def.keys} == {"rca/payments/results"}
    assert not evaluate_def.check_specs_by_output_name  # no per-partition check evaluation
    # metrics, insights and the rollup are per agent version, produced together from the results
    summarize_def = pipeline.defs.get_assets_def(AssetKey(["rca", "payments", "rollup"]))
    assert {k.to_user_string() for k in summarize_def.keys} == {
        "rca/payments/metrics",
        "rca/payments/insights",
        "rca/payments/rollup",
    }
    # one version per run: only then does each check result belong to its version's partition
    assert not summarize_def.can_subset and summarize_def.backfill_policy is None
    for name in ("metrics", "insights", "rollup"):
        node = graph.get(AssetKey(["rca", "payments", name]))
        assert node.partitions_def.name == "agent_versions"
        assert node.parent_keys == {AssetKey(["rca", "payments", "results"])}
    assert AssetKey(["rca", "payments", "rollup"]) in graph.get(AssetKey(["benchmark", "leaderboard"])).parent_keys
    assert graph.get(AssetKey(["benchmark", "comparison"])).partitions_def.name == "agent_versions"
    jobs = {j.name for j in pipeline.defs.resolve_all_job_defs()}
    assert {"evaluate__rca__payments", "evaluate__smoke_checks", "evaluate__cases", "refresh", "leaderboard"} <= jobs
    repo = pipeline.defs.get_repository_def()
    assert {s.name for s in repo.sensor_defs} == {
        "eval_files_sensor",
        "agent_versions_sensor",
        "refresh_sensor",
        "calibration_sensor",
        "missed_retries_sensor",
    }
    assert graph.get(AssetKey(["judges", "calibration"])).partitions_def.name == "judge_identities"
    assert {s.name for s in repo.schedule_defs} == {"nightly__rca__payments", "nightly__smoke_checks", "nightly__cases"}


def test_many_partitions_in_one_step_then_one_alone(make_pipeline, instance, project_dir):
    pipeline = make_pipeline()
    assert register(instance, pipeline) == []
    assert list(instance.get_dynamic_partitions("agent_versions")) == ["demo@v1", "demo@v2"]
    tests = list(instance.get_dynamic_partitions("tests__rca__payments"))
    assert tests == ["payment-rca-finds-the-database", "checkout-latency"]  # no redundant `suite::` prefix

    run = evaluate(pipeline, instance, "rca/payments", ["demo@v1", "demo@v2"])
    every = {str(multi_key(a, t)) for a in ("demo@v1", "demo@v2") for t in tests}
    key = AssetKey(["rca", "payments", "results"])
    assert materialized(instance, key, run.run_id) == every
    events = [e.event_log_entry.dagster_event for e in instance.get_records_for_run(run.run_id).records]
    count = Counter(e.event_type for e in events if e is not None)
    # per test partition: its materialization (written in batches) and its outcome, observed after it
    assert count[DagsterEventType.ASSET_MATERIALIZATION] == count[DagsterEventType.ASSET_OBSERVATION] == len(every)
    assert count[DagsterEventType.ASSET_CHECK_EVALUATION] == 0
    found = outcomes(instance, key, run.run_id)
    assert set(found) == every  # each partition's page says how its test ended
    for meta in found.values():
        assert {"status", "score", "duration_ms", "total_tokens", "cost_usd", "tool_calls"} <= set(meta)
        assert next(iter(meta)) == "status"  # the outcome first
    meta = found[str(multi_key("demo@v2", tests[0]))]
    assert meta["status"].value == "passed" and meta["total_tokens"].value > 0 and "failure" not in meta
    meta = found[str(multi_key("demo@v1", tests[1]))]
    assert meta["status"].value == "failed"
    assert "error" not in meta and "query_metrics" in meta["failure"].value  # a failure says why, as a failure
    assert meta["duration_ms"].value == round(meta["duration_ms"].value, 1)
    store = pipeline.project.store
    assert len(store.list(suite="rca/payments")) == 4
    assert (project_dir / ".agent_health" / "results").is_dir()

    # one partition alone goes through the same step and replaces exactly its result
    s = suite_of(pipeline, "smoke-checks")
    assert store.get(ResultKey("demo@v1", "smoke-checks", "smoke-checks::always-fails")) is None
    one = pipeline.defs.resolve_job_def(s.names.job).execute_in_process(
        instance=instance, partition_key=str(multi_key("demo@v1", "always-fails")), run_config=QUIET
    )
    assert one.success
    assert materialized(instance, AssetKey(["smoke_checks", "results"]), one.run_id) == {"demo@v1|always-fails"}
    assert store.get(ResultKey("demo@v1", "smoke-checks", "smoke-checks::always-fails")).status == "failed"
    assert len(store.list()) == 5


def test_the_step_runs_every_agent_version_in_one_engine_call(make_pipeline, instance, monkeypatch):
    import agent_health_dagster.defs.suite_assets as suite_assets

    calls = []
    real = suite_assets.run_partitions

    def spy(project, suite, by_agent, settings, on_result, reuse_since):
        calls.append((suite, {a: list(t) for a, t in by_agent.items()}, settings))
        return real(project, suite, by_agent, settings, on_result, reuse_since)

    monkeypatch.setattr(suite_assets, "run_partitions", spy)
    pipeline = make_pipeline(concurrency=3)
    register(instance, pipeline)
    evaluate(pipeline, instance, "rca/payments", ["demo@v1", "demo@v2"])
    [(suite, by_agent, settings)] = calls  # one call, both versions: one concurrency limit bounds them
    assert suite == "rca/payments" and set(by_agent) == {"demo@v1", "demo@v2"}
    assert settings.concurrency == 3


def test_run_config_sets_the_run_settings_of_the_step(make_pipeline, instance):
    pipeline = make_pipeline()
    register(instance, pipeline)
    s = suite_of(pipeline, "cases")
    run = {"epochs": 2, "skip_judge": True, "timeout_s": 30, "replay": "record"}
    evaluate(pipeline, instance, "cases", ["demo@v2"], run_config={**QUIET, "ops": {s.names.step: {"config": run}}})
    assert list((pipeline.project.config.state_path / "recordings").rglob("*.json"))  # the run recorded
    r = pipeline.project.store.get(ResultKey("demo@v2", "cases", "cases::queue-backlog"))
    assert r.epochs == 2 and len(r.trials) == 2
    assert all(sig.skipped for sig in r.signals if sig.kind == "judge")  # the judge was skipped
    settings = pipeline.resource.run_settings()
    assert settings.epochs == 1 and settings.judge.skip is False  # the resource's defaults are untouched


def test_removed_test_partition_gets_an_errored_outcome(make_pipeline, instance):
    pipeline = make_pipeline()
    register(instance, pipeline)
    instance.add_dynamic_partitions("tests__smoke_checks", ["gone"])
    run = evaluate(pipeline, instance, "smoke-checks", ["demo@v1"], ["gone"])
    r = pipeline.project.store.get(ResultKey("demo@v1", "smoke-checks", "smoke-checks::gone"))
    assert r.status == "errored" and "smoke-checks.eval.py" in r.error
    meta = outcomes(instance, AssetKey(["smoke_checks", "results"]), run.run_id)["demo@v1|gone"]
    assert meta["status"].value == "errored" and "failure" not in meta  # errored, told apart from failed
    assert "smoke-checks.eval.py" in meta["error"].value


def test_an_agent_version_the_configuration_does_not_know_fails_at_once(make_pipeline, instance, project_dir):
    pipeline = make_pipeline()
    register(instance, pipeline)
    instance.add_dynamic_partitions("agent_versions", ["demo@v9"])  # as the UI's "Add a partition" does
    run = evaluate(pipeline, instance, "cases", ["demo@v9"], raise_on_error=False)
    assert not run.success
    message = next(e for e in run.all_events if e.is_step_failure).step_failure_data.error.message
    assert "demo@v9" in message and str(project_dir / "agent_health_config.py") in message
    assert "add it there" in message
    assert pipeline.project.store.list(agent="demo@v9") == []
    assert "demo@v9" in instance.get_dynamic_partitions("agent_versions")  # nothing deleted under the user


@dataclass
class Refreshed:
    runs: list

    @property
    def success(self) -> bool:
        return all(r.success for r in self.runs)

    @property
    def run_ids(self) -> set[str]:
        return {r.run_id for r in self.runs}


def rollups(pipeline, instance, *agents):
    """The refresh job as the refresh sensor and the headless job launch it, one run per version:
    every suite's metrics, insights and rollup, the comparison and the leaderboard."""
    job = pipeline.defs.resolve_job_def("refresh")
    return Refreshed(
        [
            job.execute_in_process(instance=instance, partition_key=agent, run_config=QUIET, raise_on_error=False)
            for agent in agents
        ]
    )


def check_targets_latest(instance, key, name, partition):
    """Whether the newest evaluation of check `name` on `partition` is the check of that partition's
    newest materialization: what Dagster requires to show it as the partition's check status (the
    check's Partitions tab and the asset's overview; tests/dagster/test_dagster_live.py reads those)."""
    [latest, *_] = check_evals(instance, key, name, partition)
    records = instance.fetch_materializations(AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1)
    [mat] = records.records
    target = latest.evaluation.target_materialization_data
    return target is not None and target.storage_id == mat.storage_id


def test_rollups_checks_leaderboard_and_comparison(make_pipeline, instance, project_dir):
    pipeline = make_pipeline(min_pass_rate=0.5, max_errored_share=0.0)
    register(instance, pipeline)
    for s in pipeline.suites:
        evaluate(pipeline, instance, s.suite, ["demo@v1", "demo@v2"])
    refresh = rollups(pipeline, instance, "demo@v1", "demo@v2")
    assert refresh.success  # one run per version, each covering every suite
    summaries = [
        AssetKey([*p, n])
        for p in (["rca", "payments"], ["smoke_checks"], ["cases"])
        for n in ("metrics", "insights", "rollup")
    ]
    for k in [*summaries, AssetKey(["benchmark", "comparison"])]:
        for run in refresh.runs:
            assert materialized(instance, k, run.run_id) == {run.dagster_run.tags["dagster/partition"]}

    key = AssetKey(["cases", "rollup"])
    latest = {
        r.partition_key: r.asset_materialization.metadata
        for r in instance.fetch_materializations(key, limit=10).records
    }
    assert latest["demo@v1"]["pass_rate_pct"].value == 0.0 and latest["demo@v2"]["pass_rate_pct"].value == 100.0
    assert "latency_p95_ms" in latest["demo@v2"] and "cost_usd" in latest["demo@v2"]
    assert latest["demo@v1"]["missing_results"].value == 0
    problems = latest["demo@v1"]["failed_and_errored"]
    assert isinstance(problems, TableMetadataValue)
    assert [r.data["test_id"] for r in problems.records] == ["cases::queue-backlog"]
    labels = latest["demo@v1"]["labels"]
    assert {c.name for c in labels.schema.columns} >= {"label", "pass_rate_pct", "mean_score"}
    by_version = {
        r.partition_key: r.asset_materialization.metadata
        for r in instance.fetch_materializations(AssetKey(["cases", "metrics"]), limit=10).records
    }
    table = by_version["demo@v2"]["metrics"]
    rows = {r.data["metric"]: r.data for r in table.records}
    assert {"total_tokens", "latency_ms", "tool_calls", "llm_calls", "tool_errors", "retries"} <= set(rows)
    assert rows["total_tokens"]["tests"] >= 1 and rows["total_tokens"]["p95"] >= rows["total_tokens"]["p50"] > 0
    assert by_version["demo@v2"]["tokens_p50"].value > 0 and by_version["demo@v2"]["latency_p95"].value > 0
    insights = {
        r.partition_key: r.asset_materialization.metadata
        for r in instance.fetch_materializations(AssetKey(["cases", "insights"]), limit=10).records
    }
    assert {c.name for c in insights["demo@v1"]["recommendations"].schema.columns} >= {"rule", "recommendation"}
    # checks belong to their version's partition, each the check of that partition's materialization
    assert not check_evals(instance, key, "pass_rate_threshold", "demo@v1")[0].evaluation.passed
    assert check_evals(instance, key, "pass_rate_threshold", "demo@v2")[0].evaluation.passed
    assert check_evals(instance, key, "no_regression", "demo@v2")[0].evaluation.passed  # v2 only fixes tests
    for name in ("pass_rate_threshold", "errored_share_threshold", "no_regression"):
        for agent in ("demo@v1", "demo@v2"):
            assert check_targets_latest(instance, key, name, agent), (name, agent)

    board = instance.get_latest_materialization_event(AssetKey(["benchmark", "leaderboard"])).asset_materialization
    table = board.metadata["leaderboard"]
    assert isinstance(table, TableMetadataValue) and len(table.records) == 2 + 6  # totals, then per suite
    assert board.metadata["rows"].value == len(table.records)  # the row count counts every row
    first = table.records[0].data
    assert first["agent"] == "demo@v2" and first["suite"] == "*" and first["pass_rate_pct"] == 60.0
    assert all(len(repr(v)) < 12 for r in table.records for v in r.data.values() if isinstance(v, float))
    records = instance.fetch_materializations(AssetKey(["benchmark", "comparison"]), limit=10).records
    by_candidate = {r.partition_key: r.asset_materialization.metadata for r in records}
    assert by_candidate["demo@v1"]["baseline"].value == "none"
    v2 = by_candidate["demo@v2"]
    assert v2["baseline"].value == "demo@v1" and v2["fixed"].value == 1 and v2["regressed"].value == 0
    assert v2["comparison"].records[0].data["flip"] == "fixed"
    assert {r.data["flip"]: r.data["tests"] for r in v2["flips"].records}["fixed"] == 1  # flips as a table
    stats = {r.data["statistic"]: r.data["value"] for r in v2["statistics"].records}
    assert stats["candidate_pass_rate"].endswith("%") and len(stats["mcnemar_p"]) <= 6  # rounded
    saved = json.loads((project_dir / ".agent_health" / "benchmark" / "comparison-demo_v2.json").read_text())
    assert saved["tests"][0]["test_id"] == "cases::queue-backlog" and saved["tests"][0]["flip"] == "fixed"


def test_a_regression_stays_visible_after_a_newer_version_runs(make_pipeline, instance, project_dir):
    """bot@v2 regresses against bot@v1 on the DNS scenario; bot@v3 runs later: v2's failing
    no_regression check stays failing on v2's own partition."""
    (project_dir / "agent_health_config.py").write_text(
        "from agent_health import AgentSpec, define_config\n"
        "config = define_config(agents=[AgentSpec(key='bot', connector='demo',"
        " versions={'v2': {}, 'v1': {}, 'v3': {}})])\n"
    )
    (project_dir / "evals" / "cases.json").unlink()
    (project_dir / "evals" / "smoke-checks.eval.py").unlink()
    (project_dir / "evals" / "rca" / "payments.eval.py").unlink()
    (project_dir / "evals" / "dns.yaml").write_text(
        "tests:\n  - name: dns outage\n    prompt: Users cannot resolve api.example.com. Why?\n"
        "    expected_outcomes: [identifies DNS as the root cause]\n"
    )
    pipeline = make_pipeline()
    register(instance, pipeline)
    bots = [a for a in instance.get_dynamic_partitions("agent_versions") if a.startswith("bot@")]
    assert bots == ["bot@v2", "bot@v1", "bot@v3"]
    # the demo agent answers by its version name: 'v1' gets DNS right, 'v2' blames the network
    evaluate(pipeline, instance, "dns", ["bot@v2", "bot@v1"])
    key = AssetKey(["dns", "rollup"])
    assert rollups(pipeline, instance, "bot@v2", "bot@v1").success
    # v1's baseline is v2 (registered before it): v1 fixes the DNS test
    assert check_evals(instance, key, "no_regression", "bot@v1")[0].evaluation.passed
    # with bot@v1 as the configured baseline, v2's check fails and names the test
    strict = make_pipeline(baseline="bot@v1")
    assert rollups(strict, instance, "bot@v2").success
    [latest_v2, *_] = check_evals(instance, key, "no_regression", "bot@v2")
    assert not latest_v2.evaluation.passed and "dns::dns-outage" in latest_v2.evaluation.description
    # a newer version runs and rolls up; v2's regression is still there, on v2's partition
    evaluate(strict, instance, "dns", ["bot@v3"])
    assert rollups(strict, instance, "bot@v3").success
    assert not check_evals(instance, key, "no_regression", "bot@v2")[0].evaluation.passed
    assert check_evals(instance, key, "no_regression", "bot@v3")[0].partition == "bot@v3"


def test_a_rollup_with_missing_results_fails_its_check_naming_them(make_pipeline, instance):
    pipeline = make_pipeline()
    register(instance, pipeline)
    tests = list(instance.get_dynamic_partitions("tests__rca__payments"))
    evaluate(pipeline, instance, "rca/payments", ["demo@v1"], tests[:1])
    run = rollups(pipeline, instance, "demo@v1")
    assert run.success  # the other suites and versions are not held back ...
    key = AssetKey(["rca", "payments", "rollup"])
    [latest] = check_evals(instance, key, "pass_rate_threshold", "demo@v1")[:1]
    assert not latest.evaluation.passed  # ... but this rollup's gate says it is incomplete, by name
    assert "1 of 2 current test(s) have no stored result" in latest.evaluation.description
    assert f"rca/payments::{tests[1]}" in latest.evaluation.description
    meta = instance.get_latest_materialization_event(key).asset_materialization.metadata
    assert meta["missing_results"].value == 1
    assert [r.data["test_id"] for r in meta["missing"].records] == [f"rca/payments::{tests[1]}"]

    # demo@v2 has every result, its baseline demo@v1 half: no_regression cannot pass, and says why
    evaluate(pipeline, instance, "rca/payments", ["demo@v2"])
    assert rollups(pipeline, instance, "demo@v2").success
    [gate] = check_evals(instance, key, "no_regression", "demo@v2")[:1]
    assert not gate.evaluation.passed and gate.evaluation.severity.value == "ERROR"
    assert "have no stored result for baseline demo@v1" in gate.evaluation.description
    assert f"rca/payments::{tests[1]}" in gate.evaluation.description
    assert gate.evaluation.metadata["baseline_missing_results"].value == "1"  # text: it does not plot
    assert check_targets_latest(instance, key, "no_regression", "demo@v2")
    # the leaderboard marks demo@v1, whose results do not cover the current tests
    board = instance.get_latest_materialization_event(AssetKey(["benchmark", "leaderboard"])).asset_materialization
    cells = {r.data["agent"] for r in board.metadata["leaderboard"].records}
    assert any(c.startswith("demo@v1 (") and "missing)" in c for c in cells), cells
    # a deployment that only wants to be warned: the same gate fails as WARN
    warned = make_pipeline(missing_evidence="warn")
    assert rollups(warned, instance, "demo@v2").success
    [gate] = check_evals(instance, key, "no_regression", "demo@v2")[:1]
    assert not gate.evaluation.passed and gate.evaluation.severity.value == "WARN"


def test_max_partitions_per_run_is_configurable(make_pipeline, monkeypatch):
    monkeypatch.setenv("AGENT_HEALTH_MAX_PARTITIONS_PER_RUN", "50")
    node = make_pipeline().defs.resolve_asset_graph().get(AssetKey(["cases", "results"]))
    assert node.backfill_policy.max_partitions_per_run == 50
    monkeypatch.setenv("AGENT_HEALTH_MAX_PARTITIONS_PER_RUN", "0")  # one run of any size
    node = make_pipeline().defs.resolve_asset_graph().get(AssetKey(["cases", "results"]))
    assert node.backfill_policy.max_partitions_per_run is None
    monkeypatch.setenv("AGENT_HEALTH_MAX_PARTITIONS_PER_RUN", "many")
    with pytest.raises(ConfigError, match=r"\$AGENT_HEALTH_MAX_PARTITIONS_PER_RUN: expected a whole number from 0"):
        make_pipeline()


@pytest.mark.parametrize(
    "name, raw",
    [
        ("AGENT_HEALTH_MIN_PASS_RATE", "nan"),
        ("AGENT_HEALTH_MIN_PASS_RATE", "1.5"),
        ("AGENT_HEALTH_MAX_ERRORED_SHARE", "inf"),
        ("AGENT_HEALTH_SENSOR_INTERVAL_S", "0"),
        ("AGENT_HEALTH_MAX_PARTITIONS_PER_RUN", "-3"),
    ],
)
def test_a_deployment_number_out_of_bounds_is_a_config_error_naming_the_variable(make_pipeline, monkeypatch, name, raw):
    from agent_health_dagster.defs.resources import resource_from_env

    monkeypatch.setenv(name, raw)
    with pytest.raises(ConfigError, match=rf"\${name}: expected a (whole )?number from .* got '{re.escape(raw)}'"):
        resource_from_env()
        make_pipeline()


def test_a_broken_eval_file_fails_the_run_naming_the_file(make_pipeline, instance, project_dir):
    pipeline = make_pipeline()
    register(instance, pipeline)
    (project_dir / "evals" / "smoke-checks.eval.py").write_text("def broken(:\n")
    s = suite_of(pipeline, "smoke-checks")
    result = pipeline.defs.resolve_job_def(s.names.job).execute_in_process(
        instance=instance, partition_key="demo@v1|pure-data-check", run_config=QUIET, raise_on_error=False
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "smoke-checks.eval.py" in failure.step_failure_data.error.message
    assert pipeline.project.store.list() == []  # nothing half-written
