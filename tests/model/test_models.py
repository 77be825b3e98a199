"""The data model round-trips through JSON, and RunResult helpers work."""

from __future__ import annotations

import pytest

from agent_health import TestResult
from tests.core.helpers import run_dir


def test_results_round_trip_through_json(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        from agent_health import test, expect

        @test("rt", prompt="kafka consumer lag on orders", labels=["x"], epochs=2)
        async def rt(agent, judge):
            r = await agent.run()
            expect.soft(r).to_have_called_tool("get_metrics")
            await judge.observe(r, "consumer rebalance")
    """,
    )
    result = run_dir(tmp_path / "evals")["rt"]
    again = TestResult.model_validate_json(result.model_dump_json())
    assert again == result
    assert again.schema_version == 1 and again.trials[1].run.trajectory == result.trials[1].run.trajectory
    assert again.run.tool_calls("search_logs")[0].args == {"service": "orders-consumer", "level": "error"}
    assert again.metrics["redundant_calls"] == 1 and again.metrics["tool_histogram"]["search_logs"] == 2
    assert any(i.rule == "redundant_calls" for i in again.insights)


def test_run_result_helpers(write_eval, tmp_path):
    write_eval(
        "s.eval.py",
        """
        from agent_health import test

        @test("j", prompt="payment service failing, answer in json")
        async def j(agent):
            r = await agent.run()
            assert r.json()["service"] == "payment-service"
            assert r.first_tool_call("get_metrics").args["metric"] == "db_connections_active"
            assert r.first_tool_call("nope") is None
            assert len(r.steps_of_type("tool_result")) == 3
            try:
                r.output = "changed"
            except Exception:
                pass
            else:
                raise AssertionError("RunResult must be immutable")
    """,
    )
    r = run_dir(tmp_path / "evals")["j"]
    assert r.status == "passed", r.error


def test_a_run_summary_counts_unpriced_results_apart_instead_of_as_free():
    from agent_health.model import RunSummary, TestResult

    def result(cost):
        return TestResult(
            test_id="s::t", name="t", suite="s", source_file="s.json", agent="a@v1", status="passed", cost_usd=cost
        )

    summary = RunSummary.of("a@v1", [result(0.25), result(None), result(0.5)])
    assert summary.cost_usd == 0.75 and summary.unpriced == 1


def test_a_results_remembered_json_is_its_own_and_never_outlives_a_change():
    """The engine's secrets check encodes each result once and the store reuses that text
    (`json_text`): the text must be the result's own JSON, and a copy with other values (an
    analyzer's, a re-judged result) must never carry it."""
    import pickle

    from agent_health.config.secrets import scrub_model

    result = TestResult(test_id="s::t", name="t", suite="s", source_file="s.json", agent="a@v1", status="passed")
    assert scrub_model(result) is result  # nothing to remove: the same object, its text remembered
    assert result.json_text() == result.model_dump_json()
    assert getattr(result, "_json", None) == result.model_dump_json()
    changed = result.model_copy(update={"status": "failed"})
    assert getattr(changed, "_json", None) is None and '"status":"failed"' in changed.json_text()
    assert getattr(pickle.loads(pickle.dumps(result)), "_json", None) is None
    assert result == TestResult.model_validate_json(result.json_text())  # not a field: equality ignores it
    result.forget_json()
    assert getattr(result, "_json", None) is None and result.json_text() == result.model_dump_json()


def test_a_runs_remembered_json_goes_into_its_result_once_then_is_dropped():
    """A connector's secrets check keeps its run's JSON text; the result's check writes it inside
    the result's text as it is, then drops it (a result kept after its run holds no second copy),
    and a run holding a secret keeps nothing."""
    import pickle

    from agent_health.config.secrets import SecretSet, scrub_model
    from agent_health.model import RunResult

    run = RunResult(output="done", run_id="r1", trajectory=({"kind": "message", "role": "user", "content": "go"},))
    assert scrub_model(run) is run
    assert RunResult.__dict__["_json"].__get__(run) == run.model_dump_json()
    assert getattr(pickle.loads(pickle.dumps(run)), "_json", None) is None
    result = TestResult(
        test_id="s::t", name="t", suite="s", source_file="s.json", agent="a@v1", status="passed", run=run
    )
    assert scrub_model(result) is result and result.json_text() == result.model_dump_json()
    assert getattr(run, "_json", None) is None
    assert scrub_model(run) is run and getattr(run, "_json", None) is not None
    assert scrub_model(result, piecewise=True) == result  # (a result of megabytes: its fields one by one)
    assert getattr(run, "_json", None) is None
    secret = RunResult(output="key sk-0123456789abcdef", run_id="r2")
    scrubbed = SecretSet(["sk-0123456789abcdef"]).scrub_model(secret)
    assert scrubbed is not secret and "sk-0123456789abcdef" not in scrubbed.model_dump_json()
    assert getattr(secret, "_json", None) is None and getattr(scrubbed, "_json", None) is None


def test_a_run_stored_before_conversations_reads_as_one_turn():
    """Stored results written before runs had turns (no `turns`, no `conversation`) still load: a
    run of one turn, its own turn 1."""
    from agent_health.model import RunResult

    old = {"output": "done", "run_id": "r1", "trajectory": [{"kind": "message", "role": "user", "content": "go"}]}
    run = RunResult.model_validate(old)
    assert run.turns == () and run.conversation is None
    assert run.turn(1) is run and run.turn(-1) is run
    with pytest.raises(IndexError, match=r"turn\(2\): this run has 1 turn; ask for 1 to 1"):
        run.turn(2)
