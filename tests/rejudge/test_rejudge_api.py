"""`agent_health.rejudge` from Python, blocking: the tests are loaded from the results' eval files,
the judges are asked again (the cache is off by default, as in the CLI), the real HTTP agent is
never called again, and a store that cannot be written is told to `on_error` and kept in the
outcome while what it already held stays as it was."""

from __future__ import annotations

import builtins

from agent_health import load_config, rejudge
from agent_health.model import TestResult
from agent_health.stores import LocalResultStore, ResultKey
from tests.support.cli import cli_in_process

PAYMENT = "rca::payment-outage"


class FullDiskStore(LocalResultStore):
    """A local store on a disk that filled up after the first run: every result write fails."""

    def put(self, result: TestResult) -> ResultKey:
        raise OSError(28, "No space left on device")

    def put_many(self, results) -> builtins.list[ResultKey]:
        raise OSError(28, "No space left on device")


def first_run(project):
    p = cli_in_process("run", "evals", "--agent", "sre@v1", cwd=project.root)
    assert p.returncode == 0, p.stdout + p.stderr
    store = LocalResultStore(project.store_root)
    (run,) = store.list_runs()
    return store, run


def test_rejudge_from_python_loads_the_tests_and_asks_the_judge_again(rejudge_project):
    project = rejudge_project
    store, run = first_run(project)
    assert project.agent.calls == 2
    config = load_config(project.root / "agent_health_config.py")
    judged = len(project.judge.server.posts())
    project.judge.fail_all = True  # the same judge model now says no: only a new verdict sees it

    outcome = rejudge(store.run_results(run.id), config, source=run.id, store=store)
    assert outcome.skipped == ()
    assert outcome.run is not None and outcome.run.stored == 3 and not outcome.run.all_passed
    assert outcome.run.run.rejudge_of == run.id and outcome.run.output_errors == ()
    assert len(project.judge.server.posts()) == judged + 2  # both judged tests asked again
    assert project.agent.calls == 2  # replayed: never called again
    after = store.get(ResultKey("sre@v1", "rca", PAYMENT))
    assert after.status == "failed" and [j.status for j in after.judgements] == ["passed"]
    assert after.eval_run_id == outcome.run.run.id == store.list_runs()[0].id

    # a test gone from its eval file is skipped and said, its result left as it was
    (project.root / "evals" / "rca.eval.py").write_text("from agent_health import test\n")
    before = store.get(ResultKey("sre@v1", "rca", PAYMENT))
    outcome = rejudge([before], config, source="sre@v1", store=store)
    assert outcome.run is None
    assert outcome.skipped == (f"sre@v1 {PAYMENT}: the test is not in rca.eval.py any more",)
    assert store.get(ResultKey("sre@v1", "rca", PAYMENT)) == before


def test_a_store_that_cannot_be_written_is_said_and_loses_nothing(rejudge_project):
    project = rejudge_project
    store, run = first_run(project)
    before = {k: store.get(k) for k in store.list()}
    config = load_config(project.root / "agent_health_config.py")
    heard: list[str] = []

    outcome = rejudge(
        store.run_results(run.id), config, source=run.id, store=FullDiskStore(project.store_root), on_error=heard.append
    )
    assert outcome.run is not None and outcome.run.stored == 0
    assert heard and "No space left on device" in heard[0]
    assert outcome.run.output_errors and "No space left on device" in outcome.run.output_errors[0]
    assert {k: store.get(k) for k in store.list()} == before  # the stored results are untouched
    assert project.agent.calls == 2
