"""Fault class: a verdict nobody gave. A judge answer cut off at the model's length limit (OpenAI's
finish_reason "length", Bedrock's stopReason "max_tokens"), an answer without the score the format
asks for, and an echo of the answer template all parse into something json-repair can read
(`{"pass": true, "sc` is `{"pass": true}`), which once passed with score 1.00. Each must end as an
errored verdict, and an errored test, never a verdict. The judges are real servers on 127.0.0.1:
an OpenAI-compatible endpoint, and a Converse endpoint that real boto3 reaches."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_health import define_config, load_tests, run_tests
from agent_health.config.model import JudgeSettings
from agent_health.judges.rubric import Rubric
from agent_health.judges.service import JudgeService
from tests.judges.helpers import NONCE, ScriptedServer, chat, make_request, openai_settings, verdict_json
from tests.judges.test_judges_bedrock import aws_env, converse_reply, run_one  # noqa: F401 -- aws_env is a fixture
from tests.judges.test_judges_rubric_custom import RCA_EVALUATOR

CUT_OFF = 'the answer was cut off at the length limit (finish_reason "length")'
GOOD = verdict_json(False, 0.2, "the output does not name the database")
# what a judge wrote when it hit its length limit: each parses, after json-repair, into a passing verdict
FRAGMENTS = {
    "cut before the score": f'{{"nonce": "{NONCE}", "pass": true, "sc',
    "cut in the reasoning": f'{{"nonce": "{NONCE}", "pass": true, "score": 0.9, "reasoning": "the output na',
    "whole, then cut after it": f'{{"nonce": "{NONCE}", "pass": true, "score": 1, "reasoning": "ok"}} Also',
}


@pytest.fixture
def judge_server():
    server = ScriptedServer()
    yield server
    server.close()


def judge_once(server: ScriptedServer, **settings):
    async def main():
        service = JudgeService.from_settings(JudgeSettings(**openai_settings(server, **settings)))
        try:
            return await service.judge(make_request())
        finally:
            await service.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("fragment", list(FRAGMENTS))
def test_an_answer_cut_off_at_the_length_limit_is_an_errored_verdict(judge_server, fragment):
    judge_server.default = lambda rec: chat(FRAGMENTS[fragment], finish_reason="length")
    v = judge_once(judge_server)
    assert v.errored and not v.passed and v.score is None, (v.passed, v.score)
    assert CUT_OFF in v.error and "after one repair attempt" in v.error
    _, second = judge_server.posts()
    assert CUT_OFF in second.json["messages"][-1]["content"]  # the repair request says why


def test_after_a_cut_off_answer_the_judge_is_asked_once_more(judge_server):
    judge_server.script.extend([chat(FRAGMENTS["cut before the score"], finish_reason="length"), chat(GOOD)])
    v = judge_once(judge_server)
    assert (v.passed, v.score, v.errored) == (False, 0.2, False), v.error
    assert len(judge_server.posts()) == 2


NO_SCORE = "the answer has no `score` (a number from 0 to 1)"
ECHOES = {  # an answer, and why it is no verdict
    "no score": (json.dumps({"nonce": NONCE, "pass": True, "reasoning": "fine"}), NO_SCORE),
    "null score": (json.dumps({"nonce": NONCE, "pass": True, "score": None, "reasoning": "fine"}), NO_SCORE),
    "template cut after true or": (f'{{"nonce": "{NONCE}", "pass": true or ', "repeats its template ('true or')"),
    "template cut in the score": (
        f'{{"nonce": "{NONCE}", "pass": true or false, "score": a number',
        "repeats its template ('true or false')",
    ),
}


@pytest.mark.parametrize("answer", list(ECHOES))
def test_an_answer_without_a_score_or_copying_the_template_is_an_errored_verdict(judge_server, answer):
    text, reason = ECHOES[answer]
    judge_server.default = lambda rec: chat(text)
    v = judge_once(judge_server)
    assert v.errored and not v.passed and v.score is None, (v.passed, v.score)
    assert reason in v.error


def echo_of_the_repair_prompt(rec):
    """The repair request's text, as a confused judge repeats it, up to its template's first placeholder."""
    prompt = rec.json["messages"][-1]["content"]
    return chat(prompt[: prompt.index('"pass": true or') + len('"pass": true or ')])


def test_a_repair_answer_echoing_the_repair_prompt_is_an_errored_verdict(judge_server):
    judge_server.script.append(chat("I think the agent did fine."))
    judge_server.default = echo_of_the_repair_prompt
    v = judge_once(judge_server)
    assert v.errored and not v.passed and v.score is None, (v.passed, v.score)
    assert "repeats its template" in v.error and len(judge_server.posts()) == 2


def test_a_rubric_answer_cut_off_is_errored_and_never_cached(judge_server, tmp_path):
    rubric = Rubric.from_json(RCA_EVALUATOR)
    whole = {"nonce": NONCE, "metrics": {"accuracy": 5, "evidence": 9, "actionability": 1}, "reasoning": "good"}
    judge_server.default = lambda rec: chat(json.dumps(whole)[:-30], finish_reason="length")

    async def main():
        service = JudgeService.from_settings(
            JudgeSettings(**openai_settings(judge_server)), state_path=tmp_path, evaluators={"rca": rubric}
        )
        try:
            return await service.judge(make_request(evaluator="rca"))
        finally:
            await service.aclose()

    v = asyncio.run(main())
    assert v.errored and not v.passed and CUT_OFF in v.error
    assert len(judge_server.posts()) == 2
    judge_server.default = lambda rec: chat(json.dumps(whole))
    again = asyncio.run(main())  # the cut-off answers were not cached: the judge is asked again
    assert (again.passed, again.errored, again.cached) == (True, False, False), again.error
    assert len(judge_server.posts()) == 3


@pytest.mark.usefixtures("aws_env")
@pytest.mark.parametrize("stop", ["max_tokens", "model_context_window_exceeded"])
@pytest.mark.parametrize("shape", ["text", "structured"])
def test_a_bedrock_answer_stopped_at_max_tokens_is_an_errored_verdict(stop, shape):
    server = ScriptedServer()

    def cut_off(rec):
        status, headers, body = (
            converse_reply(FRAGMENTS["cut before the score"])
            if shape == "text"
            else converse_reply(tool_uses=[("verdict", {"nonce": NONCE, "pass": True})])
        )
        return status, headers, {**body, "stopReason": stop}

    server.default = cut_off
    try:
        v = run_one(server)
    finally:
        server.close()
    assert v.errored and not v.passed and v.score is None, (v.passed, v.score)
    assert f'the answer was cut off at the length limit (stopReason "{stop}")' in v.error


GATED_EVALS = """
from agent_health import test

@test("cut-off judge", prompt="Diagnose why the payment service is failing.")
async def cut_off(agent, judge):
    result = await agent.run()
    await judge(result, "identifies that the payment service cannot reach its database")
"""


def test_the_test_of_a_cut_off_verdict_is_errored_not_passed(judge_server, tmp_path):
    judge_server.default = lambda rec: chat(FRAGMENTS["cut before the score"], finish_reason="length")
    (tmp_path / "cut.eval.py").write_text(GATED_EVALS)
    loaded = load_tests([tmp_path / "cut.eval.py"])
    config = define_config(root=str(tmp_path), state_dir="state", judge=openai_settings(judge_server))
    (result,) = run_tests(loaded.tests, config, "demo@v2")
    assert result.status == "errored", (result.status, result.score)
    assert CUT_OFF in (result.error or "")
