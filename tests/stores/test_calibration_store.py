"""Human labels and judge calibrations are stored beside the results in every store type (local
files, S3 on a moto server, OpenSearch on a real node): read back whole, the newest label of each
result, claim, judge and labeller wins (labels are keyed by the result's identity and the judge's),
every calibration is kept, neither ever shows up as a result or a run, and each judge identity's
calibration (what the Dagster calibration asset runs) reads them back from the store."""

from __future__ import annotations

import time

from agent_health.analysis.calibration import latest_calibrations
from agent_health.model import EvalRun, JudgeIdentity, TestResult
from agent_health.model.calibration import Calibration, Confusion, Label, judge_key

JUDGE = JudgeIdentity(provider="openai", model="judge-a", evaluator="builtin:contextual", kind="llm")


def label(test_id: str, passed: bool, note: str = "", labeller: str = "ana") -> Label:
    return Label(test_id=test_id, agent="sre@v1", passed=passed, note=note, labeller=labeller, source="l.jsonl:1")


def calibration(kappa: float, at: float, criterion: str | None = None) -> Calibration:
    return Calibration(
        judge_key=judge_key(JUDGE), judge=JUDGE, criterion=criterion, n=40, kappa=kappa,
        confusion=Confusion(tp=20, fp=2, fn=3, tn=15), calibrated_at=at,
    )  # fmt: skip


def test_labels_and_calibrations_round_trip_beside_the_results(store):
    result = TestResult(test_id="s::a", name="a", suite="s", source_file="s.eval.py", agent="sre@v1", status="passed")
    store.put(result)
    store.put_run(EvalRun(id="20261202T000000-00000000"))
    assert store.labels() == [] and store.calibrations() == []

    assert (
        store.put_labels([label("s::a", True, "first look"), label("s::b", False), label("s::a", True, labeller="bo")])
        == 3
    )
    time.sleep(0.002)  # a later batch sorts after the earlier one
    store.put_labels([label("s::a", False, "second look")])  # ana changed her mind on s::a
    got = {(lab.test_id, lab.labeller): lab for lab in store.labels()}
    assert set(got) == {("s::a", "ana"), ("s::b", "ana"), ("s::a", "bo")}
    assert got[("s::a", "ana")].passed is False and got[("s::a", "ana")].note == "second look"
    assert got[("s::b", "ana")].source == "l.jsonl:1"

    store.put_calibrations([calibration(0.4, 100.0), calibration(0.9, 100.0, criterion="names the db")])
    store.put_calibrations([calibration(0.7, 200.0)])
    kept = store.calibrations()
    assert sorted(c.kappa for c in kept) == [0.4, 0.7, 0.9]  # every calibration is kept
    (latest,) = latest_calibrations(kept).values()  # the gate reads the newest whole-judge one
    assert latest.kappa == 0.7 and latest.judge == JUDGE and latest.confusion.tp == 20

    # none of it is a result or a run
    assert [k.test_id for k in store.list()] == ["s::a"]
    assert [r.id for r in store.list_runs()] == ["20261202T000000-00000000"]


def test_labels_are_keyed_by_the_results_and_the_judges_identity_and_calibrate_from_the_store(store):
    """A label of one test for another agent version, another run or another judge is another
    label; a newer label replaces only the one of the same result and judge. The calibration of
    each judge identity reads them back from the store (what the Dagster calibration sensor and
    asset do), with the results of the labelled tests only."""
    from agent_health.model import Signal
    from agent_health.pipeline import calibrate_identities, judge_partition_key, labelled_judges

    other = JUDGE.model_copy(update={"model": "judge-b"})

    def result(test: str, agent: str, run: str) -> TestResult:
        signals = [
            Signal(
                kind="judge",
                name="judge('names the db')",
                passed=judge.model == "judge-a",
                evidence={"provenance": judge.model_dump(mode="json")},
            )
            for judge in (JUDGE, other)
        ]
        return TestResult(
            test_id=test, name=test, suite="s", source_file="s.eval.py", agent=agent, status="passed",
            eval_run_id=run, signals=signals,
        )  # fmt: skip

    store.put_many(
        [result("s::a", "sre@v1", "run-1"), result("s::a", "sre@v2", "run-2"), result("s::c", "sre@v1", "run-1")]
    )
    a, b = judge_key(JUDGE), judge_key(other)
    first = [
        Label(test_id="s::a", agent="sre@v1", judge=a, passed=True),
        Label(test_id="s::a", agent="sre@v1", judge=b, passed=True),
        Label(test_id="s::a", agent="sre@v2", judge=a, passed=True),
        Label(test_id="s::a", run_id="run-1", judge=a, passed=False),
    ]
    assert store.put_labels(first) == 4
    time.sleep(0.002)
    store.put_labels([Label(test_id="s::a", agent="sre@v1", judge=b, passed=False, note="judge-b was right")])
    got = {(lab.agent, lab.run_id, lab.judge): lab for lab in store.labels()}
    assert len(got) == 4  # each result and judge keeps its own label
    assert got[("sre@v1", None, b)].passed is False and got[("sre@v1", None, b)].note == "judge-b was right"
    assert got[("sre@v1", None, a)].passed is True and got[("sre@v2", None, a)].passed is True
    assert got[(None, "run-1", a)].passed is False

    found = labelled_judges(store)
    assert (found.labels, found.unmatched) == (4, 0)
    labelled = {j.key: j.labels for j in found.judges}
    # judge-a: s::a for v1 (the agent label and the run-1 label) and for v2; judge-b: s::a for v1
    assert labelled == {judge_partition_key(JUDGE): 3, judge_partition_key(other): 1}
    calibrated = calibrate_identities(store, labelled, None)
    assert calibrated[judge_partition_key(other)].calibration.confusion.tn == 1  # judge-b failed, as labelled
    assert calibrated[judge_partition_key(JUDGE)].calibration.confusion.fp == 1  # the run-1 label says fail
    assert {c.judge.model for c in store.calibrations()} == {"judge-a", "judge-b"}
