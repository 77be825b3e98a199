"""Conversations through the engine with the demo agent: scripted turns (strings and functions of
the conversation so far), matchers on the whole run and on one turn, the test's timeout and the
run's budget over the whole conversation, epochs, data cases with turns or a simulated user, and
the errors a script can make."""

from __future__ import annotations

import asyncio

from agent_health import RunSettings, define_config, load_tests, run_evaluation
from agent_health.reporters.base import CallbackReporter
from tests.core.helpers import body_signals, run_dir

VAGUE = "Something is broken in production, can you help?"


def test_scripted_turns_and_matchers_on_the_run_and_on_one_turn(write_eval, tmp_path):
    write_eval(
        "chat.eval.py",
        f"""
        from agent_health import test, expect

        def fix_please(so_far):
            # a turn computed from the conversation so far: ask for the fix once diagnosed
            return "What should we change?" if "Root cause" in so_far.output else None

        @test("clarifies first", prompt={VAGUE!r})
        async def clarifies(agent):
            told = "It's the payment service: card payments fail since 14:00 UTC."
            result = await agent.run(turns=[told, fix_please])
            expect.soft(result).to_ask_before_acting()
            expect.soft(result.turn(1)).not_.to_have_called_tool("search_logs")
            expect.soft(result.turn(2)).to_have_called_tool("search_logs", args={{"service": "payment-service"}})
            expect.soft(result.turn(-1)).not_.to_have_called_tool("search_logs")
            expect.soft(result).to_match("the fix")
        """,
    )
    v2 = run_dir(tmp_path / "evals", "demo@v2")["clarifies first"]
    assert v2.status == "passed", v2.error
    run = v2.run
    assert [t.user for t in run.turns] == [
        VAGUE,
        "It's the payment service: card payments fail since 14:00 UTC.",
        "What should we change?",
    ]
    assert run.turns[0].output.endswith("errors, slow requests or restarts?")  # v2 asked which service
    assert run.output == run.turns[2].output and run.output.startswith("As diagnosed above for payment-service")
    assert run.conversation.mode == "scripted" and run.conversation.ended == "script_done"
    # each turn opens with its user message; the steps between are the agent's
    assert [run.trajectory[t.start].content for t in run.turns] == [t.user for t in run.turns]
    assert run.turns[-1].end == len(run.trajectory)
    assert run.usage.total_tokens == sum(t.usage.total_tokens for t in run.turns) > 0
    assert v2.metrics["turns"] == 3 and v2.metrics["conversation_end"] == "script_done"
    assert len(v2.metrics["turn_latency_ms"]) == 3 and "goal_reached" not in v2.metrics

    # v1 acts at once on the vague report, and forgets it: the function ends the conversation
    v1 = run_dir(tmp_path / "evals", "demo@v1")["clarifies first"]
    assert v1.status == "failed"
    failed = {s.name: s for s in body_signals(v1) if s.passed is False}
    assert set(failed) == {"to_ask_before_acting()", "not_.to_have_called_tool('search_logs')", "to_match('the fix')"}
    assert failed["to_ask_before_acting()"].reasoning == (
        "the agent asked no question before its first tool call 'search_logs' in turn 1"
    )
    assert v1.run.conversation.ended == "user_stopped" and len(v1.run.turns) == 2


def test_a_turn_function_fails_or_errors_the_test_as_its_body_would(write_eval, tmp_path):
    write_eval(
        "chat.eval.py",
        f"""
        from agent_health import SimulatedUser, expect, test

        @test("expect in a turn", prompt={VAGUE!r})
        async def expects(agent):
            def check(so_far):
                expect(so_far.output).to_contain("payment")  # fails: the agent asked a question
                return "never sent"
            await agent.run(turns=[check])

        @test("raises", prompt={VAGUE!r})
        async def raises(agent):
            def broken(so_far):
                return {{}}["missing"]
            await agent.run(turns=[broken])

        @test("not a message", prompt={VAGUE!r})
        async def number(agent):
            await agent.run(turns=[lambda so_far: 42])

        @test("bad turns", prompt={VAGUE!r})
        async def bad(agent):
            await agent.run(turns=["fine", 3])

        @test("sync body", prompt={VAGUE!r})
        def sync_body(agent):
            result = agent.run(turns=[lambda so_far: "It is the payment service."])
            expect(len(result.turns)).to_equal(2)
            expect(result).to_ask_before_acting()

        @test("opens on its own")
        async def opens(agent):
            result = await agent.run(user=SimulatedUser(goal="learn that the redis cache hit ratio dropped"))
            expect(result.turns[0].user).to_match("^I need your help: I want to learn that the redis cache")

        @test("never asks", prompt="Diagnose why the payment service is failing.")
        async def never_asks(agent):
            expect.soft(await agent.run()).to_ask_before_acting()

        @test("turn out of range", prompt={VAGUE!r})
        async def out_of_range(agent):
            result = await agent.run(turns=["It is the payment service."])
            result.turn(3)
        """,
    )
    res = run_dir(tmp_path / "evals", "demo@v2")
    assert res["expect in a turn"].status == "failed"
    assert "does not contain 'payment'" in res["expect in a turn"].error
    assert res["raises"].status == "errored" and "KeyError" in res["raises"].error
    assert "chat.eval.py:" in res["raises"].error and "agent demo@v2" not in res["raises"].error
    assert res["not a message"].status == "errored"
    assert res["not a message"].error == (
        "test 'not a message': turn 2: the turn function '<lambda>' returned int 42; return the next message "
        "(a non-empty string), or None to end the conversation"
    )
    assert res["bad turns"].status == "errored" and "turn 3 is int" in res["bad turns"].error
    assert res["sync body"].status == "passed", res["sync body"].error
    assert res["opens on its own"].status == "passed", res["opens on its own"].error
    # v2 asked which service; the user, with no fact to give, gave up
    assert res["opens on its own"].run.conversation.ended == "gave_up" and len(res["opens on its own"].run.turns) == 1
    assert res["never asks"].error == (
        "to_ask_before_acting(): the agent asked no question before its first tool call 'search_logs' in turn 1"
    )
    assert res["turn out of range"].status == "errored"
    assert "turn(3): this run has 2 turns; ask for 1 to 2 (or -1 for the last)" in res["turn out of range"].error


def run_config(tmp_path, config, settings):
    out = {}
    loaded = load_tests([tmp_path / "evals"])
    assert not loaded.errors, loaded.errors
    outcome = asyncio.run(
        run_evaluation(loaded.tests, config, settings, reporters=[CallbackReporter(lambda r: out.update({r.name: r}))])
    )
    return out, outcome


def test_the_tests_timeout_bounds_the_whole_conversation_and_keeps_the_turns_it_finished(write_eval, tmp_path):
    write_eval(
        "slow.eval.py",
        f"""
        from agent_health import test

        @test("long chat", prompt={VAGUE!r}, timeout=0.8)
        async def long_chat(agent):
            await agent.run(turns=[f"detail {{i}}" for i in range(20)])
        """,
    )
    config = define_config(
        root=str(tmp_path),
        agents=[{"key": "slow", "connector": "demo", "settings": {"latency_ms": 200}, "versions": {"v2": {}}}],
    )
    out, _ = run_config(tmp_path, config, RunSettings(agents=("slow@v2",), store=None))
    r = out["long chat"]
    assert r.status == "failed" and r.signals[0].name == "timeout"
    # the turns that finished before the timeout are kept (each took 0.2 s of the 0.8 s)
    assert r.run is not None and 1 <= len(r.run.turns) < 21
    assert r.run.usage.total_tokens == sum(t.usage.total_tokens for t in r.run.turns) > 0


def test_the_budget_counts_every_turn_of_a_conversation(write_eval, tmp_path):
    write_eval(
        "budget.eval.py",
        """
        from agent_health import test

        @test("a", prompt="Diagnose why the payment service is failing.")
        async def a(agent):
            await agent.run(turns=["And the checkout latency?", "And the disk?"])

        @test("b", prompt="Diagnose why the payment service is failing.")
        async def b(agent):
            await agent.run()
        """,
    )
    config = define_config(root=str(tmp_path))
    one, _ = run_config(tmp_path, config, RunSettings(agents=("demo@v2",), store=None, concurrency=1))
    single = one["b"].usage.total_tokens
    conversation = one["a"].usage.total_tokens
    assert conversation > 2.5 * single  # three turns, each re-reading the conversation
    # a budget the first test's conversation passes, though its first turn alone would not
    budget = RunSettings(
        agents=("demo@v2",), store=None, concurrency=1, budget={"max_tokens": int(1.5 * single)}, grep="::a$|::b$"
    )
    out, outcome = run_config(tmp_path, config, budget)
    assert set(out) == {"a"}
    assert outcome.run.not_run == {"demo@v2": 1} and outcome.run.not_run_reason == "budget reached"


def test_epochs_hold_a_conversation_per_trial(write_eval, tmp_path):
    write_eval(
        "epochs.eval.py",
        f"""
        from agent_health import test, expect

        @test("asks", prompt={VAGUE!r}, epochs=3)
        async def asks(agent):
            result = await agent.run(turns=["It is the checkout service, requests are slow."])
            expect(result).to_ask_before_acting()
        """,
    )
    r = run_dir(tmp_path / "evals", "demo@v2")["asks"]
    assert r.status == "passed" and r.trial_counts["passed"] == 3 and r.pass_at_k == 1.0
    assert all(len(t.run.turns) == 2 for t in r.trials)


def test_data_cases_take_turns_or_a_simulated_user(tmp_path):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "chat.yaml").write_text(
        f"""
tests:
  - name: clarify then diagnose
    prompt: {VAGUE}
    turns:
      - It is the payment service, card payments fail with database errors.
    expected_tools: [search_logs]
    expected_outcomes: [identifies that the payment service cannot reach its database]
  - name: simulated engineer
    user:
      persona: an on-call engineer who answers in few words
      goal: learn that the redis cache hit ratio dropped
      facts: [checkout p99 latency is 4 seconds, it started at 09:15 after a config change]
      opening: {VAGUE}
      max_turns: 4
    expected_outcomes: [the redis cache hit ratio dropped after the TTL change]
"""
    )
    loaded = load_tests([tmp_path / "evals"])
    assert not loaded.errors, loaded.errors
    cases = {t.case.name: t.case for t in loaded.tests}
    assert cases["clarify then diagnose"].turns == (
        "It is the payment service, card payments fail with database errors.",
    )
    assert cases["simulated engineer"].user.max_turns == 4 and cases["simulated engineer"].prompt is None
    res = run_dir(tmp_path / "evals", "demo@v2")
    scripted, simulated = res["clarify then diagnose"], res["simulated engineer"]
    assert scripted.status == "passed" and len(scripted.run.turns) == 2
    conv = simulated.run.conversation
    assert simulated.status == "passed" and (conv.ended, conv.goal_reached, conv.turns_to_goal) == (
        "goal_reached",
        True,
        2,
    )
    assert [t.user for t in simulated.run.turns] == [VAGUE, "checkout p99 latency is 4 seconds"]
    # v1 forgets what the user said: the demo user tells its facts, then gives up
    v1 = run_dir(tmp_path / "evals", "demo@v1")["simulated engineer"]
    assert v1.status == "failed" and v1.run.conversation.ended == "gave_up"
    assert v1.metrics["goal_reached"] is False and v1.metrics["turns_to_goal"] is None


def test_a_data_case_with_a_bad_conversation_is_one_error_naming_it(tmp_path):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "chat.yaml").write_text(
        """
tests:
  - name: both
    prompt: hi
    turns: [more]
    user: {goal: help}
  - name: no goal
    user: {persona: someone}
  - name: endless
    prompt: hi
    user: {goal: help, max_turns: 1000}
  - name: empty turn
    prompt: hi
    turns: ["fine", "  "]
  - name: fine
    prompt: hi
    turns: one more
"""
    )
    loaded = load_tests([tmp_path / "evals"])
    assert [t.case.name for t in loaded.tests] == ["fine"] and loaded.tests[0].case.turns == ("one more",)
    errors = [str(e) for e in loaded.errors]
    assert any("'both'" in e and "give turns (a script) or user (a simulated user), not both" in e for e in errors)
    assert any("'no goal'" in e and "user.goal" in e for e in errors)
    assert any("'endless'" in e and "user.max_turns" in e and "100" in e for e in errors)
    assert any("'empty turn'" in e and "turn 3 is empty" in e for e in errors)
    assert all("chat.yaml" in e for e in errors) and len(errors) == 4


def test_the_eval_files_doc_examples_run_as_written(tmp_path):
    """docs/eval-files.md's conversation examples: demo@v2 passes the code file's two tests, demo@v1
    neither; the data cases load with their turns and simulated user and hold their conversations."""
    from tests.core.test_docs_examples import block

    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "support.eval.py").write_text(block("eval-files.md", "# evals/support.eval.py"))
    (tmp_path / "evals" / "support.yaml").write_text(block("eval-files.md", "# evals/support.yaml"))
    v2 = run_dir(tmp_path / "evals", "demo@v2")
    assert {name: r.status for name, r in v2.items()} == dict.fromkeys(v2, "passed") and len(v2) == 4
    assert len(v2["clarifies, diagnoses, then gives the fix"].run.turns) == 3
    assert v2["simulated engineer"].run.conversation.goal_reached
    v1 = run_dir(tmp_path / "evals", "demo@v1")
    assert v1["clarifies, diagnoses, then gives the fix"].status == "failed"
    assert v1["a simulated on-call engineer gets the root cause"].status == "failed"
