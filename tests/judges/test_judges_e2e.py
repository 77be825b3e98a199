"""End to end through agent_health.session.run_tests with a config whose judge is the test server."""

from __future__ import annotations

import json

import pytest

from agent_health import RunSettings, define_config, load_tests, run_tests
from agent_health.judges.rubric import Rubric

from .helpers import NONCE, chat, verdict_json

EVALS = """
from agent_health import test, expect

@test("payment outage", prompt="Diagnose why the payment service is failing.")
async def payment(agent, judge):
    result = await agent.run()
    expect(result).to_have_called_tool("search_logs")
    await judge(result, "identifies that the payment service cannot reach its database")
    await judge.observe(result, {"criteria": "grades the RCA", "evaluator": "rca"})
"""

DATA = [
    {
        "name": "kafka lag",
        "prompt": "Consumers on orders topic are lagging. Why?",
        "expectedOutcomes": ["explains the consumer lag", "names the consumer group"],
    }
]


@pytest.fixture
def suite(tmp_path):
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "e2e.eval.py").write_text(EVALS)
    (tmp_path / "evals" / "data.eval.json").write_text(json.dumps(DATA))
    loaded = load_tests([tmp_path / "evals"])
    assert not loaded.errors, loaded.errors
    return tmp_path, loaded.tests


def config_for(server, root, **judge):
    rubric = Rubric.from_json(
        {"name": "rca", "scoringConfig": {"metrics": [{"name": "accuracy", "scale": "1-5"}]}, "passThreshold": 0.5}
    )
    return define_config(
        root=str(root),
        state_dir="state",
        prices={"judge-model": (1.0, 2.0)},
        evaluators={"rca": rubric},
        judge={
            "provider": "openai",
            "model": "judge-model",
            "backoff_s": 0.01,
            "settings": {"base_url": server.url + "/v1"},
            **judge,
        },
    )


def responder(passed=True):
    def reply(rec):
        model = rec.json["model"]  # the server answers with the model it was asked for
        if "Metrics and scales" in rec.json["messages"][-1]["content"]:
            metrics = {"nonce": NONCE, "metrics": {"accuracy": 2}, "reasoning": "ok", "suggestions": ["cite logs"]}
            return chat(json.dumps(metrics), model=model)
        return chat(verdict_json(passed, 0.9 if passed else 0.1), usage=(1000, 100), model=model)

    return reply


def by_name(results):
    return {r.name: r for r in results}


def test_llm_judged_suite_passes_and_counts_judge_tokens_apart(openai_server, suite):
    root, tests = suite
    openai_server.default = responder(True)
    results = by_name(run_tests(tests, config_for(openai_server, root), "demo@v2"))
    assert {n: r.status for n, r in results.items()} == {"payment outage": "passed", "kafka lag": "passed"}
    payment = results["payment outage"]
    judged = [s for s in payment.signals if s.kind == "judge"]
    assert [s.role for s in judged] == ["gate", "observe"]
    assert judged[0].evidence["model"] == "judge-model" and judged[1].evidence["evaluator"] == "rca"
    assert judged[1].passed is False and judged[1].score == 0.25  # observe: fails the metric, not the test
    assert judged[1].evidence["details"]["suggestions"] == ["cite logs"]
    assert payment.judge_usage.input_tokens == 1100 and payment.judge_usage.model == "judge-model"
    assert payment.usage.model != "judge-model" and payment.usage.total_tokens > 0
    assert payment.cost_usd is not None and payment.cost_usd > (1000 * 1 + 100 * 2) / 1e6
    assert results["kafka lag"].judge_usage.input_tokens == 2000  # two expected outcomes, two judge calls
    assert len(openai_server.posts()) == 4


def test_failed_and_errored_judges_set_the_test_status(openai_server, suite):
    root, tests = suite
    openai_server.default = responder(False)
    results = by_name(run_tests(tests, config_for(openai_server, root), "demo@v2"))
    assert results["payment outage"].status == "failed"

    openai_server.default = lambda r: (500, {}, {"error": "judge backend down"})
    results = by_name(run_tests(tests, config_for(openai_server, root, cache=False), "demo@v2"))
    for r in results.values():
        assert r.status == "errored" and "HTTP 500" in r.error and "judge backend down" in r.error
        assert r.score is None


def test_skip_mode_and_no_cache_through_the_session(openai_server, suite, monkeypatch):
    root, tests = suite
    openai_server.default = responder(True)
    config = config_for(openai_server, root)
    results = run_tests(tests, config, "demo@v2", RunSettings(judge={"skip": True}))
    assert openai_server.posts() == [] and all(r.status == "passed" for r in results)
    assert all(s.skipped for r in results for s in r.signals if s.kind == "judge")
    assert not (root / "state" / "judge_cache.sqlite").exists()

    run_tests(tests, config, "demo@v2")
    assert len(openai_server.posts()) == 4
    run_tests(tests, config, "demo@v2")
    assert len(openai_server.posts()) == 4  # cached
    run_tests(tests, config, "demo@v2", no_cache=True)
    assert len(openai_server.posts()) == 8
    monkeypatch.setenv("AGENT_HEALTH_NO_CACHE", "1")
    run_tests(tests, config, "demo@v2")
    assert len(openai_server.posts()) == 12


def test_demo_judge_stays_the_default(suite):
    root, tests = suite
    results = run_tests(tests, define_config(root=str(root), state_dir="state"), "demo@v2")
    judged = [s for r in results for s in r.signals if s.kind == "judge" and s.evidence["evaluator"] == "demo"]
    assert judged and not (root / "state" / "judge_cache.sqlite").exists()


def test_judge_calls_are_priced_at_their_own_model_and_unknown_stays_unknown(openai_server, suite):
    from agent_health.pricing import cost_of, total_cost

    root, tests = suite
    payment = [t for t in tests if t.case.name == "payment outage"]
    openai_server.default = responder(True)
    config = config_for(openai_server, root, model="gpt-4o-mini", cache=False)
    (known,) = run_tests(payment, config.model_copy(update={"prices": {}}), "demo@v2")
    judge_calls = [s.evidence["usage"] for s in known.signals if s.kind == "judge" and "usage" in s.evidence]
    assert [u["model"] for u in judge_calls] == ["gpt-4o-mini", "gpt-4o-mini"]
    expected = total_cost([known.usage, *(cost_usage(u) for u in judge_calls)])
    assert known.cost_usd == expected and known.cost_usd > cost_of(known.usage)  # the judge's tokens cost too

    # a judge model without a price makes the whole cost unknown, not the agent's part alone
    config = config_for(openai_server, root, cache=False)
    (unknown,) = run_tests(payment, config.model_copy(update={"prices": {}}), "demo@v2")
    assert unknown.judge_usage.total_tokens > 0 and unknown.cost_usd is None


def cost_usage(data):
    from agent_health.model import Usage

    return Usage(**data)
