"""Judge answers: repaired locally before any second call, structured outputs asked for, and a clean
fallback (once, remembered) when an endpoint rejects them. Provider calls are counted on real
servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_health.config.model import JudgeSettings
from agent_health.judges.rubric import Rubric
from agent_health.judges.service import JudgeService

from .helpers import NONCE, chat, make_request, openai_settings, verdict_json

FAILING = {"nonce": NONCE, "pass": False, "score": 0.2, "reasoning": "no database named"}

# answers a model gives that are not clean JSON, but whose meaning json-repair recovers locally
REPAIRABLE = {
    "prose around": f"Here is my verdict: {json.dumps(FAILING)} I hope this helps!",
    "fenced with prose": "Sure.\n```json\n" + json.dumps(FAILING, indent=2) + "\n```\nDone.",
    "trailing comma": json.dumps(FAILING)[:-1] + ",}",
    "single quotes": f"{{'nonce': '{NONCE}', 'pass': false, 'score': 0.2, 'reasoning': 'no database named'}}",
    "python literals": f'{{"nonce": "{NONCE}", "pass": False, "score": 0.2, "reasoning": "no database named"}}',
    "unquoted keys": f'{{nonce: "{NONCE}", pass: false, score: 0.2, reasoning: "no database named"}}',
    "comments": f'{{"nonce": "{NONCE}", // echoed\n"pass": false, /* verdict */ "score": 0.2, "reasoning": "x"}}',
    "cut off": f'{{"nonce": "{NONCE}", "pass": false, "score": 0.2, "reasoning": "no database na',
    "strings for values": f'{{"nonce": "{NONCE}", "pass": "false", "score": "0.2", "reasoning": "x"}}',
}
# answers nothing local can fix: one more call, with the problem spelled out
NEEDS_A_SECOND_CALL = {
    "no JSON at all": ("I think the agent failed.", "not a JSON object"),
    "score out of range": (json.dumps({**FAILING, "score": 3}), "`score` must be from 0 to 1"),
    "no nonce": (json.dumps({k: v for k, v in FAILING.items() if k != "nonce"}), "does not carry this prompt's nonce"),
}


def judge_all(server, requests, **settings):
    async def main():
        service = JudgeService.from_settings(JudgeSettings(**openai_settings(server, **settings)))
        try:
            return [await service.judge(r) for r in requests]
        finally:
            await service.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("case", sorted(REPAIRABLE))
def test_malformed_answers_are_repaired_locally_in_one_call(openai_server, case):
    openai_server.script.append(chat(REPAIRABLE[case]))
    (v,) = judge_all(openai_server, [make_request()])
    assert (v.passed, v.score, v.errored) == (False, 0.2, False), v.error
    assert len(openai_server.posts()) == 1


@pytest.mark.parametrize("case", sorted(NEEDS_A_SECOND_CALL))
def test_what_repair_cannot_fix_costs_exactly_one_more_call(openai_server, case):
    answer, problem = NEEDS_A_SECOND_CALL[case]
    openai_server.script.extend([chat(answer), chat(json.dumps(FAILING))])
    (v,) = judge_all(openai_server, [make_request()])
    assert (v.passed, v.score, v.errored) == (False, 0.2, False), v.error
    _, second = openai_server.posts()
    assert problem in second.json["messages"][-1]["content"]


def test_verdicts_are_asked_for_as_structured_output(openai_server):
    (v,) = judge_all(openai_server, [make_request()])
    assert v.passed and not v.errored
    (rec,) = openai_server.posts()
    fmt = rec.json["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "verdict" and fmt["json_schema"]["strict"]
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["nonce", "pass", "score", "reasoning"] and schema["additionalProperties"] is False


def rejects_response_format(rec):
    if "response_format" in rec.json:
        return 400, {}, {"error": {"message": "Unrecognized request argument supplied: response_format"}}
    return chat(verdict_json(True, 0.9))


def test_an_endpoint_rejecting_structured_output_is_retried_without_once_and_remembered(openai_server):
    openai_server.default = rejects_response_format
    verdicts = judge_all(openai_server, [make_request(), make_request(criteria="names the host db-primary")])
    assert [(v.passed, v.errored) for v in verdicts] == [(True, False), (True, False)], verdicts[0].error
    sent = ["response_format" in r.json for r in openai_server.posts()]
    assert sent == [True, False, False]  # one rejected call, then never asked again in this run

    judge_all(openai_server, [make_request(criteria="a new run asks again")])
    assert ["response_format" in r.json for r in openai_server.posts()[3:]] == [True, False]


def test_a_bad_request_that_is_not_about_the_schema_is_errored_and_not_remembered(openai_server):
    openai_server.default = lambda r: (400, {}, {"error": {"message": "maximum context length exceeded"}})
    verdicts = judge_all(openai_server, [make_request(), make_request(criteria="another claim")])
    assert all(v.errored and "maximum context length" in v.error for v in verdicts)
    assert ["response_format" in r.json for r in openai_server.posts()] == [True, False, True, False]


def test_structured_output_can_be_turned_off_and_json_mode_used_instead(openai_server):
    judge_all(
        openai_server, [make_request()], settings={"base_url": openai_server.url + "/v1", "structured_output": False}
    )
    judge_all(
        openai_server,
        [make_request()],
        settings={"base_url": openai_server.url + "/v1", "structured_output": False, "json_mode": True},
    )
    first, second = openai_server.posts()
    assert "response_format" not in first.json and second.json["response_format"] == {"type": "json_object"}


def test_rubric_answers_are_structured_and_repaired_locally(openai_server):
    rubric = Rubric.from_json({"name": "rca", "scoringConfig": {"metrics": [{"name": "accuracy", "scale": "1-5"}]}})
    openai_server.script.append(
        chat(f"{{'nonce': '{NONCE}', 'metrics': {{'accuracy': 4}}, 'reasoning': 'ok', 'suggestions': [],}}")
    )

    async def main():
        service = JudgeService.from_settings(
            JudgeSettings(**openai_settings(openai_server)), evaluators={"rca": rubric}
        )
        try:
            return await service.judge(make_request(evaluator="rca"))
        finally:
            await service.aclose()

    v = asyncio.run(main())
    assert (v.score, v.errored) == (0.75, False), v.error
    (rec,) = openai_server.posts()
    schema = rec.json["response_format"]["json_schema"]
    assert schema["name"] == "rubric_scores" and schema["schema"]["properties"]["metrics"]["required"] == ["accuracy"]
