"""The Dagster rollup checks of a suite judged by an uncalibrated gating judge (a real judge server
on 127.0.0.1) say that its verdicts only observed, against a temporary SQLite instance."""

from __future__ import annotations

import warnings

import pytest
from dagster import AssetCheckKey, AssetKey, instance_for_test

from agent_health_dagster.defs.build import build_pipeline
from agent_health_dagster.defs.partitions import range_tags, version_range_tags
from agent_health_dagster.headless import QUIET, register

from .test_calibrate_cli import JUDGE_PASS
from .test_gate import GATE

pytestmark = pytest.mark.filterwarnings("ignore")
warnings.filterwarnings("ignore", module="dagster")


@pytest.fixture
def instance(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    with instance_for_test(temp_dir=str(home)) as inst:
        yield inst


def test_the_rollup_check_says_the_judge_was_not_calibrated(calib_project, instance):
    from agent_health_dagster.defs.resources import AgentHealthResource

    project = calib_project
    project.judge.passes = JUDGE_PASS
    project.configure(calibration=GATE, cache=False)
    pipeline = build_pipeline(AgentHealthResource(config_path=str(project.root / "agent_health_config.py")))
    assert register(instance, pipeline) == []
    (suite,) = pipeline.suites
    tests = list(instance.get_dynamic_partitions(suite.names.tests_partitions))
    job = pipeline.defs.resolve_job_def(suite.names.job)
    assert job.execute_in_process(instance=instance, tags=range_tags(["sre@v1"], tests), run_config=QUIET).success
    refresh = pipeline.defs.resolve_job_def("refresh").execute_in_process(
        instance=instance, tags=version_range_tags(["sre@v1"]), run_config=QUIET, raise_on_error=False
    )
    assert refresh.success
    history = instance.event_log_storage.get_asset_check_execution_history(
        AssetCheckKey(AssetKey(["cases", "rollup"]), "pass_rate_threshold"), limit=5
    )
    (check,) = [h for h in history if h.partition == "sre@v1"][:1]
    evaluation = check.evaluation
    assert evaluation.passed  # the judge's failing verdicts only observed
    assert "Not calibrated, its verdicts only observed: judge openai:judge-a (builtin:contextual)" in (
        evaluation.description
    )
    assert "it has no calibration" in evaluation.description and "(12 test(s))" in evaluation.description
    assert "uncalibrated_judges" in evaluation.metadata


def test_the_calibration_asset_per_judge_identity_and_its_check(calib_project, instance):
    from agent_health_dagster.defs.resources import AgentHealthResource

    from .test_calibrate_cli import labels

    project = calib_project
    project.judge.passes = JUDGE_PASS
    project.configure(calibration=GATE, cache=False)
    pipeline = build_pipeline(AgentHealthResource(config_path=str(project.root / "agent_health_config.py")))
    graph = pipeline.defs.resolve_asset_graph()
    node = graph.get(AssetKey(["judges", "calibration"]))
    assert AssetKey(["judges", "labels"]) in node.parent_keys and AssetKey(["cases", "results"]) in node.parent_keys
    assert register(instance, pipeline) == []
    (suite,) = pipeline.suites
    tests = list(instance.get_dynamic_partitions(suite.names.tests_partitions))
    job = pipeline.defs.resolve_job_def(suite.names.job)
    assert job.execute_in_process(instance=instance, tags=range_tags(["sre@v1"], tests), run_config=QUIET).success
    # the labels, stored beside the results without calibrating (what the HTML export or a team's tool does)
    from agent_health.analysis.labels import load_labels

    pipeline.project.store.put_labels(load_labels(labels(project)))

    calibrate = pipeline.defs.resolve_job_def("calibrate")
    assert calibrate.execute_in_process(instance=instance, run_config=QUIET, raise_on_error=False).success
    meta = instance.get_latest_materialization_event(AssetKey(["judges", "calibration"])).asset_materialization.metadata
    (row,) = [r.data for r in meta["calibration"].records]
    assert row["judge"] == "openai:judge-a (builtin:contextual)" and row["labels"] == 12
    assert row["kappa"] == 0.5 and row["calibrated"] is False and row["disagreements"] == 3
    assert meta["unmatched_labels"].value == 1
    history = instance.event_log_storage.get_asset_check_execution_history(
        AssetCheckKey(AssetKey(["judges", "calibration"]), "judges_calibrated"), limit=5
    )
    evaluation = history[0].evaluation
    assert not evaluation.passed
    assert "kappa 0.500 is below min_kappa 0.6" in evaluation.description
    # the calibration is stored: the gate of the next run reads it
    assert [c.kappa for c in pipeline.project.store.calibrations()] == [0.5]


def test_the_rollup_check_says_the_judge_was_calibrated(calib_project, instance):
    from agent_health.analysis.labels import load_labels
    from agent_health_dagster.defs.resources import AgentHealthResource

    from .test_calibrate_cli import HUMAN_PASS, labels

    project = calib_project
    project.judge.passes = HUMAN_PASS  # agrees with every label
    project.configure(calibration=GATE, cache=False)
    pipeline = build_pipeline(AgentHealthResource(config_path=str(project.root / "agent_health_config.py")))
    assert register(instance, pipeline) == []
    (suite,) = pipeline.suites
    tests = list(instance.get_dynamic_partitions(suite.names.tests_partitions))
    evaluate = pipeline.defs.resolve_job_def(suite.names.job)
    assert evaluate.execute_in_process(instance=instance, tags=range_tags(["sre@v1"], tests), run_config=QUIET).success
    pipeline.project.store.put_labels(load_labels(labels(project)))
    calibrate = pipeline.defs.resolve_job_def("calibrate")
    assert calibrate.execute_in_process(instance=instance, run_config=QUIET, raise_on_error=False).success
    (check,) = instance.event_log_storage.get_asset_check_execution_history(
        AssetCheckKey(AssetKey(["judges", "calibration"]), "judges_calibrated"), limit=1
    )
    assert check.evaluation.passed and "every labelled judge is calibrated" in check.evaluation.description

    # the next evaluation gates on the calibrated judge, and its rollup check says so
    assert evaluate.execute_in_process(instance=instance, tags=range_tags(["sre@v1"], tests), run_config=QUIET).success
    refresh = pipeline.defs.resolve_job_def("refresh").execute_in_process(
        instance=instance, tags=version_range_tags(["sre@v1"]), run_config=QUIET, raise_on_error=False
    )
    assert refresh.success
    history = instance.event_log_storage.get_asset_check_execution_history(
        AssetCheckKey(AssetKey(["cases", "rollup"]), "pass_rate_threshold"), limit=5
    )
    description = next(h for h in history if h.partition == "sre@v1").evaluation.description
    assert "pass rate 50.0%" in description  # cases 6-11 failed: the judge gated
    assert "Calibrated judges (judge.calibration): openai:judge-a (builtin:contextual) (12 test(s))" in description
    assert "Not calibrated" not in description
