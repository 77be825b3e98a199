"""Human labels and judge calibrations are stored beside the results in every store type (local
files, S3 on a moto server, OpenSearch on a real node): read back whole, the newest label of each
result, claim, judge and labeller wins, every calibration is kept, and neither ever shows up as a
result or a run."""

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
