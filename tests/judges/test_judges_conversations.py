"""Judging a conversation: `judge()` and the conversation judges see every turn (the LLM judge's
prompt shows the user's later messages as the user's, and how the conversation ended), the
deterministic ones read the simulated user's own outcome, and a judge of one turn sees that turn."""

from __future__ import annotations

import json
import re

import pytest

from agent_health import define_config, load_tests, run_tests
from agent_health.judges.identity import IN_PROCESS
from agent_health.judges.prompt import PromptLimits, build_prompt, render_trajectory
from agent_health.model import RunSettings

from .helpers import NONCE, ScriptedServer, chat, strings

VAGUE = "Something is broken in production, can you help?"

EVALS = f"""
from agent_health import (
    ConversationGoal, KnowledgeRetention, RoleAdherence, SimulatedUser, TurnsToGoal, expect, judge, test
)

@test("scripted", prompt={VAGUE!r})
async def scripted(agent):
    result = await agent.run(turns=["It is the payment service: card payments fail since 14:00 UTC."])
    await judge(result, "the agent asked which service before it searched the logs")
    await judge(result, RoleAdherence("an SRE assistant"))
    await judge(result, KnowledgeRetention())
    await judge(result.turn(1), "the first answer is a question")

@test("simulated")
async def simulated(agent):
    result = await agent.run(user=SimulatedUser(
        goal="learn that the redis cache hit ratio dropped",
        facts=["checkout p99 latency is 4 seconds"], opening={VAGUE!r}, max_turns=3))
    await judge(result, ConversationGoal())
    await judge(result, TurnsToGoal(max_turns=1))
    await judge(result, ConversationGoal(goal="find out why checkout is slow"))
"""


def verdicts(rec):
    """A passing verdict for every prompt; the simulated user is the demo policy (judge model only)."""
    return chat(json.dumps({"nonce": NONCE, "pass": True, "score": 0.8, "reasoning": "seen"}), usage=(300, 30))


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    server = ScriptedServer()
    server.default = verdicts
    root = tmp_path_factory.mktemp("conv")
    (root / "evals").mkdir()
    (root / "evals" / "chat.eval.py").write_text(EVALS)
    config = define_config(
        root=str(root),
        state_dir="state",
        judge={
            "provider": "openai",
            "model": "judge-model",
            "settings": {"base_url": server.url + "/v1"},
            "per_test": {"chat::simulated": "demo"},  # the demo user policy and judge for the simulated one
        },
    )
    try:
        results = run_tests(
            load_tests([root / "evals"]).tests, config, settings=RunSettings(agents=("demo@v2",), store=None)
        )
        prompts = ["\n".join(strings(r.json)) for r in server.posts()]
        yield {r.name: r for r in results}, prompts
    finally:
        server.close()


def test_the_llm_judge_sees_every_turn_and_how_the_conversation_ended(judged):
    results, prompts = judged
    r = results["scripted"]
    assert r.status == "passed", r.error
    asked = next(p for p in prompts if "asked which service before it searched" in p)
    # the first message is the task; the later user message is shown as the user's, in order
    assert "Task given to the agent (the user's first message)" in asked and VAGUE in asked
    assert re.search(r"#\d+ user message: It is the payment service", asked)
    question = asked.index("errors, slow requests or restarts?")
    assert question < asked.index("user message: It is the payment service") < asked.index("tool_call search_logs")
    assert "2 turns with scripted user messages; the conversation ended: script_done." in asked
    assert "The conversation, turn by turn" in asked
    role = next(p for p in prompts if "stayed in its role (an SRE assistant)" in p)
    assert "user message: It is the payment service" in role
    assert any("used those facts in its later answers" in p for p in prompts)
    # a judge of one turn sees that turn alone: no later turn, no conversation section
    one = next(p for p in prompts if "the first answer is a question" in p)
    assert "It is the payment service" not in one and "How the conversation went" not in one
    assert [s.name for s in r.signals if s.kind == "judge"] == [
        "judge('the agent asked which service before it searched the logs')",
        "judge(\"RoleAdherence(role='an SRE assistant')\")",
        "judge('KnowledgeRetention()')",
        "judge('the first answer is a question')",
    ]


def test_conversation_judges_read_the_simulated_users_outcome(judged):
    results, _ = judged
    r = results["simulated"]
    goal, turns, stated = (s for s in r.signals if s.kind == "judge")
    assert (
        goal.passed and goal.score == 1.0 and goal.reasoning.startswith("the simulated user reached its goal at turn 2")
    )
    assert goal.evidence["provenance"]["provider"] == IN_PROCESS  # no model asked
    assert not turns.passed and turns.score == 0.5 and turns.reasoning == "the goal was reached at turn 2 (at most 1)"
    assert stated.evidence["evaluator"] == "ConversationGoal"  # with a goal, it asks the judge model (demo here)


def test_runs_of_one_turn_keep_their_judge_prompts():
    """A run of one turn has no user step and no conversation: its prompt (and cache key) is as before."""
    steps = [{"kind": "message", "content": "hi", "tool": None, "args": None, "is_error": False}]
    assert render_trajectory(steps, PromptLimits()) == "#1 message: hi"
    prompt = build_prompt(
        "c", {"prompt": "p", "output": "o", "trajectory": steps}, {}, ("output", "trajectory"), PromptLimits()
    )
    assert "conversation" not in prompt.user.lower() and "Task given to the agent\n" in prompt.user
