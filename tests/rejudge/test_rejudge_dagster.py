"""The Dagster rejudge job over two partitions of a suite, against a temporary SQLite instance: the
evaluate step ran the (real HTTP) agent once per test; the rejudge job re-judges the stored results
of exactly the selected partitions with another judge model, never calls the agent, keeps the
earlier verdicts, stores the results as a new run, and gives the re-judged partitions new
results materializations that show the newest status and the provenance."""

from __future__ import annotations

import contextlib
import os
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import AssetKey, instance_for_test

from agent_health.stores import ResultKey
from agent_health_dagster.defs.build import build_pipeline
from agent_health_dagster.defs.partitions import multi_key, range_tags
from agent_health_dagster.defs.resources import AgentHealthResource
from agent_health_dagster.headless import QUIET, register

pytestmark = pytest.mark.filterwarnings("ignore")
warnings.filterwarnings("ignore", module="dagster")

PAYMENT, CHECKOUT, DATA = "payment-outage", "checkout-latency", "pure-data-check"  # partition keys


def tid(key):
    return f"rca::{key}"


@contextlib.contextmanager
def no_new_entries(folder: Path) -> Iterator[None]:
    """`folder` takes no new file or folder, whoever asks (root too: the immutable attribute;
    anyone else: no write permission); what is in it stays readable."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(folder)], check=True)
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
    else:
        mode = folder.stat().st_mode
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(mode)


@pytest.fixture
def instance(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    with instance_for_test(temp_dir=str(home)) as inst:
        yield inst


def latest_outcomes(instance, key, run_id):
    """The results materializations of a run: partition -> metadata."""
    records = instance.fetch_materializations(key, limit=100).records
    return {r.partition_key: r.asset_materialization.metadata for r in records if r.run_id == run_id}


def test_the_rejudge_job_rejudges_exactly_its_partitions_without_the_agent(rejudge_project, instance):
    project = rejudge_project
    pipeline = build_pipeline(AgentHealthResource(config_path=str(project.root / "agent_health_config.py")))
    assert register(instance, pipeline) == []
    (suite,) = pipeline.suites
    tests = list(instance.get_dynamic_partitions(suite.names.tests_partitions))
    assert tests == [PAYMENT, CHECKOUT, DATA]
    agents = ["sre@v1"]
    evaluate = pipeline.defs.resolve_job_def(suite.names.job)
    assert evaluate.execute_in_process(instance=instance, tags=range_tags(agents, tests), run_config=QUIET).success
    assert project.agent.calls == 2
    store = pipeline.project.store
    before = {t: store.get(ResultKey("sre@v1", "rca", tid(t))) for t in tests}
    assert before[PAYMENT].status == before[CHECKOUT].status == "passed"

    project.judge.failing_models = {"judge-b"}
    job = pipeline.defs.resolve_job_def("rejudge__rca")
    config = {**QUIET, "ops": {"rca__rejudge": {"config": {"judge_model": "openai:judge-b"}}}}
    two = [PAYMENT, CHECKOUT]  # the first two partitions of the suite: one range, one run
    run = job.execute_in_process(instance=instance, tags=range_tags(agents, two), run_config=config)
    assert run.success
    assert project.agent.calls == 2  # the evaluate step stays the only one that calls the agent
    assert project.judge.models()[-2:] == ["judge-b", "judge-b"]

    for t in two:
        after = store.get(ResultKey("sre@v1", "rca", tid(t)))
        assert after.status == "failed" and [j.status for j in after.judgements] == ["passed"]
        assert after.run.replayed and after.run.run_id == before[t].run.run_id
    assert store.get(ResultKey("sre@v1", "rca", tid(DATA))) == before[DATA]  # not selected: untouched
    newest = store.list_runs()[0]
    assert newest.transport == "dagster" and newest.rejudge_of and "rca" in newest.rejudge_of
    assert {r.test_id for r in store.run_results(newest.id)} == {tid(t) for t in two}

    # the re-judged partitions (and only they) have new results materializations with the new outcome
    parts = {str(multi_key("sre@v1", t)) for t in two}
    outcomes = latest_outcomes(instance, AssetKey(["rca", "results"]), run.run_id)
    assert set(outcomes) == parts
    for meta in outcomes.values():
        assert meta["status"].value == "failed" and meta["failure"].value
        assert meta["judgements"].value == 2
        assert "openai:judge-b" in meta["judges"].value
        assert meta["agent_settings_hash"].value == before[PAYMENT].provenance.agent_settings_hash
        assert meta["rejudge_run"].value == newest.id


def test_the_rejudge_job_fails_clearly_without_stored_results(rejudge_project, instance):
    project = rejudge_project
    pipeline = build_pipeline(AgentHealthResource(config_path=str(project.root / "agent_health_config.py")))
    register(instance, pipeline)
    job = pipeline.defs.resolve_job_def("rejudge__rca")
    run = job.execute_in_process(
        instance=instance, tags=range_tags(["sre@v1"], [PAYMENT, CHECKOUT]), run_config=QUIET, raise_on_error=False
    )
    assert not run.success
    failure = run.failure_data_for_node("rca__rejudge")
    assert failure is not None
    assert "rca: no stored result for any of the 2 selected partition(s); materialize rca/results" in (
        failure.error.message
    )
    assert project.agent.calls == 0


def test_a_store_that_cannot_take_the_rejudge_run_fails_the_step(rejudge_project, instance):
    project = rejudge_project
    pipeline = build_pipeline(AgentHealthResource(config_path=str(project.root / "agent_health_config.py")))
    register(instance, pipeline)
    tags = range_tags(["sre@v1"], [PAYMENT, CHECKOUT])
    evaluate = pipeline.defs.resolve_job_def(pipeline.suites[0].names.job)
    assert evaluate.execute_in_process(instance=instance, tags=tags, run_config=QUIET).success
    # the run history's folder takes no new run: the stored results read, no new run can be recorded
    job = pipeline.defs.resolve_job_def("rejudge__rca")
    with no_new_entries(project.store_root / "_runs"):
        run = job.execute_in_process(instance=instance, tags=tags, run_config=QUIET, raise_on_error=False)
    assert not run.success
    failure = run.failure_data_for_node("rca__rejudge")
    # the store cannot take the re-judging run's manifest: it stops before any test is judged again
    assert failure is not None and "rca: result store" in failure.error.message
    assert "(the run manifest); no test was run" in failure.error.message
    # nothing claims the partitions changed
    assert latest_outcomes(instance, AssetKey(["rca", "results"]), run.run_id) == {}
    assert project.agent.calls == 2
