"""The run history of the local store: manifests, results per run, a killed run's torn line."""

from __future__ import annotations

import os

from agent_health.model import EvalRun, RunSettings, TestResult
from agent_health.stores import LocalResultStore, ResultKey


def result(test_id: str, run: str | None, status: str = "passed") -> TestResult:
    return TestResult(
        test_id=test_id, name=test_id, suite="s", source_file="s.eval.py", agent="a@v1", status=status, eval_run_id=run
    )


def test_runs_keep_their_own_results_when_later_runs_replace_the_latest(tmp_path):
    store = LocalResultStore(tmp_path)
    first = EvalRun(
        id="20261201T000000-aaaa0001", transport="cli", started_at=1.0, settings=RunSettings(agents=("a@v1",))
    )
    second = EvalRun(id="20261201T000001-aaaa0002", transport="cli", started_at=2.0)
    store.put_run(first)
    store.put(result("s::t1", first.id, "failed"))
    store.put(result("s::t2", first.id))
    store.put_run(second)
    store.put(result("s::t1", second.id, "passed"))

    assert store.get(ResultKey("a@v1", "s", "s::t1")).status == "passed"  # the latest
    assert [(r.test_id, r.status) for r in store.run_results(first.id)] == [("s::t1", "failed"), ("s::t2", "passed")]
    assert [r.id for r in store.list_runs()] == [second.id, first.id]  # newest first
    assert store.get_run(first.id).settings.agents == ("a@v1",)
    assert store.list() == [ResultKey("a@v1", "s", "s::t1"), ResultKey("a@v1", "s", "s::t2")]  # no run folder
    assert store.get_run("20261201T000009-ffffffff") is None
    assert list(store.run_results("20261201T000009-ffffffff")) == []


def test_a_torn_last_line_is_skipped_and_a_result_stored_twice_counts_once(tmp_path):
    store = LocalResultStore(tmp_path)
    run = EvalRun(id="20261201T000000-bbbb0001")
    store.put_run(run)
    store.put(result("s::t1", run.id, "errored"))
    store.put(result("s::t2", run.id))
    store.put(result("s::t1", run.id, "passed"))  # a retried step
    log = tmp_path / "_runs" / run.id / "results.jsonl"
    with log.open("ab") as fh:
        fh.write(result("s::t3", run.id).model_dump_json().encode()[:40])  # killed mid-write
    assert os.path.getsize(log) > 0
    assert [(r.test_id, r.status) for r in store.run_results(run.id)] == [("s::t2", "passed"), ("s::t1", "passed")]
