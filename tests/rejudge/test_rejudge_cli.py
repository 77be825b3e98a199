"""`agent-health rejudge` as a user runs it (a separate process): the stored agent runs are replayed
(the real HTTP agent is never called again), the judges run again (a real OpenAI-compatible judge
server), optionally with another model, earlier verdicts are kept as history, the result's status
and score follow the newest, and the re-judged results are stored as a new run that says what it
re-judged."""

from __future__ import annotations

import pytest

from agent_health.model import JudgeIdentity, RunReport
from agent_health.stores import LocalResultStore, ResultKey
from tests.support.cli import cli_in_process

PAYMENT = "rca::payment-outage"


def run(project, *args):
    p = cli_in_process("run", "evals", "--agent", "sre@v1", *args, cwd=project.root)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    return p


def rejudge(project, *args, expect=None):
    p = cli_in_process("rejudge", *args, cwd=project.root)
    assert "Traceback" not in p.stderr, p.stderr
    if expect is not None:
        assert p.returncode == expect, p.stdout + p.stderr
    return p


def judge_identity(signal) -> JudgeIdentity:
    return JudgeIdentity.model_validate(signal.evidence["provenance"])


def verdicts(result):
    return [s for s in result.signals if s.kind == "judge"]


def test_rejudge_with_another_model_keeps_history_and_never_calls_the_agent(rejudge_project):
    project = rejudge_project
    run(project)
    store = LocalResultStore(project.store_root)
    (first_run,) = store.list_runs()
    assert project.agent.calls == 2  # two tests run the agent, the data test does not
    before = store.get(ResultKey("sre@v1", "rca", PAYMENT))
    assert before is not None and before.status == "passed"
    judge_calls = len(project.judge.server.posts())

    project.judge.failing_models = {"judge-b"}
    p = rejudge(project, first_run.id, "--judge-model", "openai:judge-b", "--reporter", "json=rejudged.json", expect=1)
    assert f"a rejudge of {first_run.id}" in p.stderr and "3 result(s) re-judged" in p.stderr
    assert project.agent.calls == 2  # replayed: the agent was never called again
    assert project.judge.models()[judge_calls:] == ["judge-b", "judge-b"]

    after = store.get(ResultKey("sre@v1", "rca", PAYMENT))
    assert after is not None
    # status and score follow the newest judgement; the old one is history with its judge
    assert after.status == "failed" and after.score == pytest.approx(0.6)  # the expectation 1, the judge 0.2
    (earlier,) = after.judgements
    assert earlier.status == "passed" and earlier.score == before.score and earlier.eval_run_id == first_run.id
    assert [j.model for j in earlier.judges] == ["judge-a"]
    assert [s.reasoning for s in earlier.signals] == ["verdict of judge-a"]
    assert [judge_identity(s).model for s in verdicts(after)] == ["judge-b"]
    assert verdicts(after)[0].reasoning == "verdict of judge-b"
    # the agent run is the stored one, replayed; what belongs to it stays the first run's
    assert after.run is not None and after.run.replayed and after.run.run_id == before.run.run_id
    assert after.run.output == before.run.output and after.duration_ms == before.duration_ms
    assert after.provenance.agent_eval_run_id == first_run.id
    assert after.provenance.agent_settings_hash == before.provenance.agent_settings_hash
    assert after.provenance.judged_at > before.provenance.judged_at

    # a new run in the store, marked as a rejudge of the first, holding the re-judged results
    second = store.list_runs()[0]
    assert second.id != first_run.id and second.transport == "cli" and second.status == "finished"
    assert second.rejudge_of == first_run.id and after.eval_run_id == second.id
    assert {r.test_id for r in store.run_results(second.id)} == {
        PAYMENT,
        "rca::checkout-latency",
        "rca::pure-data-check",
    }
    assert {r.status for r in store.run_results(first_run.id)} == {"passed"}  # the first run's results stay
    # the reporters saw the same results as the store (history included)
    rep = RunReport.model_validate_json((project.root / "rejudged.json").read_bytes())
    payment = next(r for r in rep.results if r.test_id == PAYMENT)
    assert payment.judgements == after.judgements

    # judging again stacks the history, oldest first
    project.judge.failing_models = set()
    rejudge(project, "sre@v1", "--grep", "payment", expect=0)
    latest = store.get(ResultKey("sre@v1", "rca", PAYMENT))
    assert [j.status for j in latest.judgements] == ["passed", "failed"] and latest.status == "passed"
    assert [j.eval_run_id for j in latest.judgements] == [first_run.id, second.id]
    assert len(store.get(ResultKey("sre@v1", "rca", "rca::checkout-latency")).judgements) == 1  # not selected
    assert project.agent.calls == 2


def test_a_judge_that_changes_its_mind_fails_the_test_and_the_cache_is_opt_in(rejudge_project):
    project = rejudge_project
    run(project, "--grep", "payment")
    calls = len(project.judge.server.posts())
    project.judge.fail_all = True  # the same judge model now says no

    rejudge(project, "--cache", expect=0)  # reusing cached verdicts: nothing is asked, nothing changes
    assert len(project.judge.server.posts()) == calls
    store = LocalResultStore(project.store_root)
    cached = store.get(ResultKey("sre@v1", "rca", PAYMENT))
    assert cached.status == "passed" and verdicts(cached)[0].cached and len(cached.judgements) == 1

    rejudge(project, expect=1)  # the default asks the judge again
    assert len(project.judge.server.posts()) == calls + 1
    result = store.get(ResultKey("sre@v1", "rca", PAYMENT))
    assert result.status == "failed" and [j.status for j in result.judgements] == ["passed", "passed"]
    assert project.agent.calls == 1


def test_epochs_replay_each_trial_run(rejudge_project):
    project = rejudge_project
    run(project, "--grep", "payment", "--epochs", "3")
    assert project.agent.calls == 3
    store = LocalResultStore(project.store_root)
    before = store.get(ResultKey("sre@v1", "rca", PAYMENT))
    project.judge.fail_all = True
    rejudge(project, "sre@v1", expect=1)
    after = store.get(ResultKey("sre@v1", "rca", PAYMENT))
    assert project.agent.calls == 3
    assert after.epochs == 3 and [t.run.run_id for t in after.trials] == [t.run.run_id for t in before.trials]
    assert [t.status for t in after.trials] == ["failed"] * 3 and after.judgements[0].status == "passed"


def test_changed_removed_and_unreplayable_tests_are_said_and_nothing_is_lost(rejudge_project):
    project = rejudge_project
    run(project)
    store = LocalResultStore(project.store_root)
    (first,) = store.list_runs()
    checkout_before = store.get(ResultKey("sre@v1", "rca", "rca::checkout-latency"))
    from tests.rejudge.conftest import EVAL

    # the payment test now asks another prompt; the checkout test is gone
    body = EVAL.replace("Diagnose why the payment service is failing.", "Diagnose the payments.")
    body = body[: body.index('@test("checkout latency"')] + body[body.index('@test("pure data check")') :]
    project.write_eval(body)
    p = rejudge(project, first.id, expect=1)
    assert "skipped: sre@v1 rca::checkout-latency: the test is not in rca.eval.py any more" in p.stderr
    assert project.agent.calls == 2
    payment = store.get(ResultKey("sre@v1", "rca", PAYMENT))
    assert payment.status == "errored" and "now sends another prompt than its stored run" in payment.error
    assert "never calls the agent" in payment.error and payment.judgements[0].status == "passed"
    # the skipped result is left exactly as it was
    assert store.get(ResultKey("sre@v1", "rca", "rca::checkout-latency")) == checkout_before


def test_nothing_to_rejudge_is_a_usage_error(rejudge_project):
    project = rejudge_project
    p = rejudge(project, expect=2)
    assert "no runs in store" in p.stderr
    run(project, "--grep", "payment")
    (project.root / "evals" / "rca.eval.py").unlink()
    p = rejudge(project, expect=2)
    assert "eval file" in p.stderr and "is gone" in p.stderr and "nothing to re-judge" in p.stderr
    assert project.agent.calls == 1
