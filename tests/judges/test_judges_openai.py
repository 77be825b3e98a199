"""The openai provider against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from agent_health.config.model import JudgeSettings
from agent_health.errors import ConfigError
from agent_health.judges.service import JudgeService

from .helpers import chat, make_request, openai_settings, verdict_json


def judge(service: JudgeService, request=None):
    async def main():
        try:
            return await service.judge(request or make_request())
        finally:
            await service.aclose()

    return asyncio.run(main())


def service_for(server, **kw) -> JudgeService:
    return JudgeService.from_settings(JudgeSettings(**openai_settings(server, **kw)))


def test_valid_answer_becomes_the_verdict_with_judge_usage(openai_server):
    openai_server.script.append(chat(verdict_json(True, 0.85, "names db-primary"), usage=(321, 45)))
    v = judge(service_for(openai_server))
    assert (v.passed, v.score, v.reasoning, v.errored, v.cached) == (True, 0.85, "names db-primary", False, False)
    assert (v.evaluator, v.model) == ("openai", "judge-model")
    assert (v.usage.input_tokens, v.usage.output_tokens, v.usage.model) == (321, 45, "judge-model")
    (req,) = openai_server.posts()
    assert req.path == "/v1/chat/completions"
    body = req.json
    assert body["model"] == "judge-model" and body["temperature"] == 0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    user = body["messages"][1]["content"]
    assert "identifies that the payment service cannot reach its database" in user
    assert "search_logs" in user and "db-primary:5432" in user  # trajectory and output are shown


def test_failed_claim_is_a_failed_verdict_not_an_error(openai_server):
    openai_server.script.append(chat(verdict_json(False, 0.1, "no database mentioned")))
    v = judge(service_for(openai_server))
    assert (v.passed, v.score, v.errored) == (False, 0.1, False)


def test_malformed_answer_is_repaired_once(openai_server):
    openai_server.script.extend(
        [chat("Sure! The agent did great, I'd say it passes."), chat("```json\n" + verdict_json(True, 0.7) + "\n```")]
    )
    v = judge(service_for(openai_server))
    assert (v.passed, v.score, v.errored) == (True, 0.7, False)
    first, second = openai_server.posts()
    msgs = second.json["messages"]
    assert msgs[:2] == first.json["messages"]
    assert msgs[2] == {"role": "assistant", "content": "Sure! The agent did great, I'd say it passes."}
    assert msgs[3]["role"] == "user" and "could not be used" in msgs[3]["content"]
    assert "not a JSON object" in msgs[3]["content"]
    assert v.usage.input_tokens == 200 and v.usage.llm_calls == 2  # both calls are judge tokens


def test_malformed_twice_is_errored_with_an_excerpt(openai_server):
    openai_server.script.extend([chat("I think it passes"), chat('{"pass": "maybe", "score": 3}')])
    v = judge(service_for(openai_server))
    assert v.errored and not v.passed and v.score is None
    assert "after one repair attempt" in v.error and '"pass": "maybe"' in v.error
    assert "suite::t" in v.error  # names the test
    assert len(openai_server.posts()) == 2
    signal = v.to_signal()
    assert signal.errored and signal.passed is None


def test_score_out_of_range_triggers_repair(openai_server):
    openai_server.script.extend([chat('{"pass": true, "score": 7, "reasoning": "x"}'), chat(verdict_json(True, 0.7))])
    v = judge(service_for(openai_server))
    assert v.score == 0.7 and "`score` must be from 0 to 1" in openai_server.posts()[1].json["messages"][3]["content"]


def test_429_backs_off_honouring_retry_after_then_succeeds(openai_server):
    openai_server.script.extend(
        [(429, {"Retry-After": "0.4"}, {"error": {"message": "rate limited"}}), chat(verdict_json(True, 0.9))]
    )
    t0 = time.perf_counter()
    v = judge(service_for(openai_server))
    elapsed = time.perf_counter() - t0
    assert (v.passed, v.errored, v.usage.retries) == (True, False, 1)
    assert len(openai_server.posts()) == 2
    assert elapsed >= 0.4  # waited as told


def test_rate_limit_that_never_ends_is_errored_not_a_pass(openai_server):
    openai_server.default = lambda r: (429, {}, {"error": "slow down"})
    v = judge(service_for(openai_server, max_retries=2))
    assert v.errored and "still rate limited after 2 retries" in v.error
    assert len(openai_server.posts()) == 3


def test_server_error_is_errored_with_status_and_body(openai_server):
    openai_server.script.append((500, {}, {"error": {"message": "model crashed"}}))
    v = judge(service_for(openai_server))
    assert v.errored and "HTTP 500" in v.error and "model crashed" in v.error
    assert len(openai_server.posts()) == 1  # a 500 is not retried as a rate limit


def test_api_key_comes_from_env_and_never_reaches_the_verdict(openai_server, monkeypatch):
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-secret-123")
    openai_server.script.append((401, {}, {"error": "bad key"}))
    v = judge(
        service_for(openai_server, settings={"base_url": openai_server.url + "/v1", "api_key_env": "JUDGE_TEST_KEY"})
    )
    assert openai_server.posts()[0].headers["authorization"] == "Bearer sk-secret-123"
    assert v.errored and "HTTP 401" in v.error
    assert "sk-secret-123" not in json.dumps(v.model_dump()) + json.dumps(v.to_signal().model_dump())


def test_missing_key_env_and_inline_secret_are_config_errors(openai_server, monkeypatch):
    monkeypatch.delenv("NOPE_KEY", raising=False)
    with pytest.raises(ConfigError, match="NOPE_KEY"):
        service_for(openai_server, settings={"base_url": openai_server.url, "api_key_env": "NOPE_KEY"})
    from agent_health import define_config

    with pytest.raises(ConfigError, match="secrets never go in the configuration"):
        define_config(judge={"provider": "openai", "model": "m", "settings": {"api_key": "sk-x"}})


def test_unreachable_endpoint_is_errored_naming_it():
    settings = JudgeSettings(provider="openai", model="m", settings={"base_url": "http://user:pw@127.0.0.1:9/v1"})
    v = judge(JudgeService.from_settings(settings))
    assert v.errored and "127.0.0.1:9" in v.error and "pw" not in v.error


def test_unknown_provider_is_a_clear_config_error():
    from agent_health import define_config

    with pytest.raises(ConfigError, match="judge.provider 'nope' unknown"):
        define_config(judge={"provider": "nope", "model": "m"})
    with pytest.raises(ConfigError, match=r"judge.providers\['x'\]: type 'grok' unknown"):
        define_config(judge={"providers": {"x": {"type": "grok"}}})
    with pytest.raises(ConfigError, match="needs a model"):
        JudgeService.from_settings(JudgeSettings(provider="openai"))


def test_skip_mode_makes_no_call_and_needs_no_credentials(openai_server, monkeypatch):
    monkeypatch.delenv("NOPE_KEY", raising=False)
    settings = openai_settings(openai_server, settings={"base_url": openai_server.url, "api_key_env": "NOPE_KEY"})
    service = JudgeService.from_settings(JudgeSettings(**settings), skip=True)
    v = judge(service)
    assert v.skipped and v.passed and v.score is None and openai_server.posts() == []


def test_model_per_call_and_per_test_and_named_providers(openai_server):
    settings = JudgeSettings(
        **openai_settings(
            openai_server,
            per_test={"suite::slow*": "big-model"},
            providers={"local": {"type": "openai", "model": "local-default", "base_url": openai_server.url + "/v1"}},
        )
    )

    async def main():
        service = JudgeService.from_settings(settings)
        try:
            out = [
                await service.judge(make_request(test_id="suite::t")),
                await service.judge(make_request(test_id="suite::slow-one")),
                await service.judge(make_request(model="openai:call-model")),
                await service.judge(make_request(model="local")),
                await service.judge(make_request(model="local:other")),
                await service.judge(make_request(model="demo")),
            ]
        finally:
            await service.aclose()
        return out

    verdicts = asyncio.run(main())
    assert [r.json["model"] for r in openai_server.posts()] == [
        "judge-model",
        "big-model",
        "call-model",
        "local-default",
        "other",
    ]
    assert verdicts[-1].evaluator == "demo" and not verdicts[-1].errored


def test_judge_concurrency_limit_is_separate_and_enforced(openai_server):
    openai_server.delay_s = 0.15
    service = service_for(openai_server, concurrency=2)

    async def main():
        try:
            return await asyncio.gather(*(service.judge(make_request(criteria=f"claim {i}")) for i in range(6)))
        finally:
            await service.aclose()

    verdicts = asyncio.run(main())
    assert all(not v.errored for v in verdicts)
    assert openai_server.max_in_flight == 2
