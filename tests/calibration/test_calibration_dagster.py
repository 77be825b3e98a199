"""Judge calibration in Dagster, against a temporary SQLite instance: the calibration asset has a
partition per judge identity (added by the calibration sensor as identities appear) with the
hand-computed figures and a check per partition, and the rollup checks of a suite judged by a
gating judge (a real judge server on 127.0.0.1) say whether it was calibrated."""

from __future__ import annotations

import warnings

import pytest
from dagster import AssetCheckKey, AssetKey, AssetRecordsFilter, SensorResult, build_sensor_context, instance_for_test

from agent_health.model import JudgeIdentity, Signal, TestResult
from agent_health.model.calibration import Label
from agent_health_dagster.defs.build import build_pipeline
from agent_health_dagster.defs.partitions import RANGE_END_TAG, RANGE_START_TAG, range_tags, version_range_tags
from agent_health_dagster.headless import QUIET, apply_sensor_result, register

from .conftest import case_id
from .test_calibrate_cli import HUMAN_PASS, JUDGE_PASS, hand_kappa_interval
from .test_gate import GATE

CALIBRATION = AssetKey(["judges", "calibration"])
CHECK = AssetCheckKey(CALIBRATION, "judges_calibrated")

pytestmark = pytest.mark.filterwarnings("ignore")
warnings.filterwarnings("ignore", module="dagster")


@pytest.fixture
def instance(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    with instance_for_test(temp_dir=str(home)) as inst:
        yield inst


def pipeline_of(project):
    from agent_health_dagster.defs.resources import AgentHealthResource

    return build_pipeline(AgentHealthResource(config_path=str(project.root / "agent_health_config.py")))


def tick(pipeline, instance, cursor=None) -> SensorResult:
    """One tick of the calibration sensor, its partitions and observations applied."""
    sensor = pipeline.defs.get_sensor_def("calibration_sensor")
    with build_sensor_context(instance=instance, cursor=cursor, resources={"agent_health": pipeline.resource}) as ctx:
        result = sensor(ctx)
    apply_sensor_result(instance, result)
    return result


def launch(pipeline, instance, result: SensorResult) -> None:
    """Run the calibration runs the sensor requested, as the daemon would."""
    job = pipeline.defs.resolve_job_def("calibrate")
    for request in result.run_requests:
        assert job.execute_in_process(instance=instance, tags=request.tags, run_config=QUIET).success


def partition_meta(instance, key):
    """The metadata of the newest materialization of one identity's partition."""
    records = instance.fetch_materializations(AssetRecordsFilter(CALIBRATION, asset_partitions=[key]), limit=1)
    return records.records[0].asset_materialization.metadata


def check_of(instance, key):
    history = instance.event_log_storage.get_asset_check_execution_history(CHECK, limit=20)
    return next(h for h in history if h.partition == key).evaluation


def identities(instance):
    return list(instance.get_dynamic_partitions("judge_identities"))


def test_the_rollup_check_says_the_judge_was_not_calibrated(calib_project, instance):
    project = calib_project
    project.judge.passes = JUDGE_PASS
    project.configure(calibration=GATE, cache=False)
    pipeline = pipeline_of(project)
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


def test_the_real_judge_gets_its_calibration_partition_and_check(calib_project, instance):
    from agent_health.analysis.labels import load_labels
    from agent_health.model.calibration import judge_key

    from .test_calibrate_cli import labels

    project = calib_project
    project.judge.passes = JUDGE_PASS
    project.configure(calibration=GATE, cache=False)
    pipeline = pipeline_of(project)
    graph = pipeline.defs.resolve_asset_graph()
    node = graph.get(CALIBRATION)
    assert AssetKey(["judges", "labels"]) in node.parent_keys and AssetKey(["cases", "results"]) in node.parent_keys
    assert register(instance, pipeline) == []
    (suite,) = pipeline.suites
    tests = list(instance.get_dynamic_partitions(suite.names.tests_partitions))
    job = pipeline.defs.resolve_job_def(suite.names.job)
    assert job.execute_in_process(instance=instance, tags=range_tags(["sre@v1"], tests), run_config=QUIET).success
    assert not tick(pipeline, instance).run_requests and identities(instance) == []  # verdicts, no labels yet

    # the labels, stored beside the results without calibrating (what the HTML export or a team's tool does)
    pipeline.project.store.put_labels(load_labels(labels(project)))
    result = tick(pipeline, instance)
    (key,) = identities(instance)
    assert key.startswith("openai:judge-a+contextual@judge-prompt-2~")
    (request,) = result.run_requests
    assert request.tags[RANGE_START_TAG] == request.tags[RANGE_END_TAG] == key
    (observed,) = result.asset_events  # the labels: 13 stored, one matched no verdict
    assert observed.metadata["labels"].value == 13 and observed.metadata["unmatched_labels"].value == 1
    launch(pipeline, instance, result)

    meta = partition_meta(instance, key)
    assert meta["judge"].value == "openai:judge-a (builtin:contextual)" and meta["labels"].value == 12
    assert meta["kappa"].value == 0.5 and meta["calibrated"].value is False and meta["disagreements"].value == 3
    assert meta["judge_key"].value.startswith(key.rsplit("~", 1)[1])
    evaluation = check_of(instance, key)
    assert not evaluation.passed
    assert "kappa 0.500 is below min_kappa 0.6" in evaluation.description
    # the calibration is stored: the gate of the next run reads it
    (stored,) = pipeline.project.store.calibrations()
    assert stored.kappa == 0.5 and stored.judge_key == judge_key(stored.judge) == meta["judge_key"].value


def test_the_rollup_check_says_the_judge_was_calibrated(calib_project, instance):
    from agent_health.analysis.labels import load_labels

    from .test_calibrate_cli import labels

    project = calib_project
    project.judge.passes = HUMAN_PASS  # agrees with every label
    project.configure(calibration=GATE, cache=False)
    pipeline = pipeline_of(project)
    assert register(instance, pipeline) == []
    (suite,) = pipeline.suites
    tests = list(instance.get_dynamic_partitions(suite.names.tests_partitions))
    evaluate = pipeline.defs.resolve_job_def(suite.names.job)
    assert evaluate.execute_in_process(instance=instance, tags=range_tags(["sre@v1"], tests), run_config=QUIET).success
    pipeline.project.store.put_labels(load_labels(labels(project)))
    launch(pipeline, instance, tick(pipeline, instance))
    (key,) = identities(instance)
    evaluation = check_of(instance, key)
    assert evaluation.passed and evaluation.description.endswith("kappa 1.000 over 12 label(s): calibrated")

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


# Two judge identities judge every case: A (the built-in judge on judge-a) agrees with the humans
# but for case 6; B (a rubric on judge-b) is the scripted judge of test_calibrate_cli (kappa 0.5).
A = JudgeIdentity(
    provider="openai", model="judge-a", evaluator="builtin:contextual", kind="llm",
    definition_hash="a1", prompt_version="judge-prompt/2",
)  # fmt: skip
B = JudgeIdentity(provider="openai", model="judge-b", evaluator="Factuality", kind="rubric", definition_hash="b1")
C = JudgeIdentity(provider="bedrock", model="anthropic.claude-3-haiku", evaluator="builtin:contextual", kind="llm")
A_PASS = HUMAN_PASS | {6}


def verdict(identity: JudgeIdentity, claim: str, passed: bool) -> Signal:
    return Signal(
        kind="judge", name=f"judge({claim!r})", passed=passed, score=1.0 if passed else 0.0,
        reasoning=f"{identity.model}: {'holds' if passed else 'does not hold'}",
        evidence={"provenance": identity.model_dump(mode="json")},
    )  # fmt: skip


def judged(i: int, *verdicts: Signal) -> TestResult:
    """Case i's stored result for sre@v1 with the given judge verdicts (what an evaluation stores)."""
    return TestResult(
        test_id=case_id(i), name=f"case {i:02d}", suite="cases", source_file="cases.eval.py", agent="sre@v1",
        status="passed", signals=list(verdicts),
    )  # fmt: skip


def human(i: int, passed: bool) -> Label:
    return Label(test_id=case_id(i), agent="sre@v1", passed=passed, labeller="ana", source="labels.jsonl")


def confusion(judge_pass: set[int], cases=range(12)):
    """Rows human (pass, fail), columns judge (pass, fail), as hand_kappa_interval takes them."""
    h = [i for i in cases if i in HUMAN_PASS], [i for i in cases if i not in HUMAN_PASS]
    return [[sum(i in judge_pass for i in row), sum(i not in judge_pass for i in row)] for row in h]


def test_each_judge_identity_is_a_partition_with_its_own_kappa_and_check(calib_project, instance):
    from agent_health.pipeline import judge_partition_key

    project = calib_project
    project.configure(calibration=GATE)  # min_kappa 0.6 over at least 10 labels
    pipeline = pipeline_of(project)
    store = pipeline.project.store
    store.put_many(
        judged(i, verdict(A, "names the database", i in A_PASS), verdict(B, "is factual", i in JUDGE_PASS))
        for i in range(12)
    )
    store.put_labels([human(i, i in HUMAN_PASS) for i in range(12)])  # no claim: every verdict of the case

    first = tick(pipeline, instance)
    a, b = judge_partition_key(A), judge_partition_key(B)
    assert sorted(identities(instance)) == sorted([a, b])
    assert a.startswith("openai:judge-a+contextual@judge-prompt-2~") and b.startswith("openai:judge-b+Factuality~")
    launch(pipeline, instance, first)

    for key, judge_pass in ((a, A_PASS), (b, JUDGE_PASS)):
        kappa, low, high = hand_kappa_interval(confusion(judge_pass))
        meta = partition_meta(instance, key)
        assert meta["labels"].value == 12
        assert meta["kappa"].value == pytest.approx(kappa, abs=1e-4)
        assert meta["kappa_low"].value == pytest.approx(max(-1.0, low), abs=1e-3)  # the interval is clipped
        assert meta["kappa_high"].value == pytest.approx(min(1.0, high), abs=1e-3)
        (tp, fn), (fp, tn) = confusion(judge_pass)
        rows = {r.data["human"]: r.data for r in meta["confusion"].records}
        assert (rows["pass"]["judge_pass"], rows["pass"]["judge_fail"]) == (tp, fn)
        assert (rows["fail"]["judge_pass"], rows["fail"]["judge_fail"]) == (fp, tn)
        assert meta["tpr"].value == pytest.approx(tp / (tp + fn), abs=1e-4)
        assert meta["tnr"].value == pytest.approx(tn / (tn + fp), abs=1e-4)
        assert meta["agreement"].value == pytest.approx((tp + tn) / 12, abs=1e-4)
        assert meta["disagreements"].value == fp + fn
    assert partition_meta(instance, a)["kappa"].value == pytest.approx(5 / 6, abs=1e-4)  # 11 of 12, pe 0.5
    assert partition_meta(instance, b)["evaluator"].value == "Factuality"
    assert partition_meta(instance, a)["prompt_version"].value == "judge-prompt/2"

    # A's kappa 0.833 meets min_kappa 0.6; B's 0.5 does not: each partition's check says so
    passed, failed = check_of(instance, a), check_of(instance, b)
    assert passed.passed and "kappa 0.833 over 12 label(s): calibrated" in passed.description
    assert not failed.passed
    assert failed.description == (  # as docs/judges.md quotes it
        "openai:judge-b (Factuality) is not calibrated, its verdicts only observe: its calibration's kappa 0.500 "
        "is below min_kappa 0.6"
    )
    # both stored, so the calibration gate of the next run reads them
    kappas = {c.judge.model: c.kappa for c in store.calibrations()}
    assert kappas == {"judge-a": pytest.approx(5 / 6), "judge-b": pytest.approx(0.5)}

    # nothing changed: no run; a new identity's first labelled verdicts add its partition and calibrate only it
    assert not tick(pipeline, instance, first.cursor).run_requests
    store.put_many(
        judged(
            i,
            verdict(A, "names the database", i in A_PASS),
            verdict(B, "is factual", i in JUDGE_PASS),
            verdict(C, "names the database", i in HUMAN_PASS),
        )
        for i in range(12)
    )
    added = tick(pipeline, instance, first.cursor)
    c = judge_partition_key(C)
    assert identities(instance) == [*identities(instance)[:2], c]
    assert c.startswith("bedrock:anthropic.claude-3-haiku+contextual~")
    (request,) = added.run_requests
    assert request.tags[RANGE_START_TAG] == request.tags[RANGE_END_TAG] == c
    launch(pipeline, instance, added)
    assert partition_meta(instance, c)["kappa"].value == 1.0 and check_of(instance, c).passed

    # a label changed: every identity it labels is recalibrated, in one run over the range
    store.put_labels([human(6, True)])  # ana changed her mind on case 6
    changed = tick(pipeline, instance, added.cursor)
    (request,) = changed.run_requests
    assert (request.tags[RANGE_START_TAG], request.tags[RANGE_END_TAG]) == (identities(instance)[0], c)
    launch(pipeline, instance, changed)
    assert partition_meta(instance, a)["disagreements"].value == 0  # A passed case 6
    assert partition_meta(instance, b)["disagreements"].value == 2  # so did B, which missed 5 and passed 7
    assert partition_meta(instance, c)["kappa"].value == pytest.approx(5 / 6, abs=1e-4)  # C failed case 6


def test_an_identity_with_no_labelled_verdict_left_fails_its_check(calib_project, instance):
    """An identity whose labelled verdicts were replaced (its tests rerun by another judge) keeps its
    partition; calibrating it again says it has no labelled verdict, and stores nothing."""
    from agent_health.pipeline import judge_partition_key

    project = calib_project
    project.configure(calibration=GATE)
    pipeline = pipeline_of(project)
    store = pipeline.project.store
    store.put_many(judged(i, verdict(B, "is factual", i in HUMAN_PASS)) for i in range(12))
    store.put_labels([human(i, i in HUMAN_PASS) for i in range(12)])
    launch(pipeline, instance, tick(pipeline, instance))
    b = judge_partition_key(B)
    assert check_of(instance, b).passed

    store.put_many(judged(i, verdict(A, "names the database", i in HUMAN_PASS)) for i in range(12))
    tick(pipeline, instance)
    assert identities(instance) == [b, judge_partition_key(A)]  # B keeps its history
    job = pipeline.defs.resolve_job_def("calibrate")
    assert job.execute_in_process(instance=instance, partition_key=b, run_config=QUIET).success
    assert partition_meta(instance, b)["labels"].value == 0
    evaluation = check_of(instance, b)
    assert not evaluation.passed and "no labelled verdict among the latest results" in evaluation.description
    assert len(store.calibrations()) == 1  # only the first calibration of B
