"""Rubric evaluators (agent-health evaluator JSON) and custom evaluators from the configuration."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_health.config.model import JudgeSettings
from agent_health.errors import ConfigError
from agent_health.judges.rubric import Rubric, load_rubric
from agent_health.judges.service import JudgeService
from agent_health.model import Verdict

from .helpers import NONCE, MemoryTraceTools, chat, make_request, openai_settings

RCA_EVALUATOR = {
    "name": "rca-quality",
    "description": "Grades root-cause analyses",
    "systemPrompt": "You are an SRE lead grading a junior engineer's root-cause analysis.",
    "scoringConfig": {
        "metrics": [
            {"name": "accuracy", "weight": 3, "scale": "1-5", "description": "is the root cause right"},
            {"name": "evidence", "weight": 1, "scale": {"min": 0, "max": 10}},
            {"name": "actionability", "weight": 1, "scale": [0, 1]},
        ]
    },
    "passThreshold": 70,
}


def run_many(server, requests, evaluators, state=None, **kw):
    async def main():
        service = JudgeService.from_settings(
            JudgeSettings(**openai_settings(server, **kw)), state_path=state, evaluators=evaluators
        )
        try:
            return [await service.judge(r) for r in requests]
        finally:
            await service.aclose()

    return asyncio.run(main())


def rubric_answer(acc, ev, act, suggestions=("Quote the failing log line",)):
    return chat(
        json.dumps(
            {
                "nonce": NONCE,
                "metrics": {"accuracy": acc, "evidence": ev, "actionability": act},
                "reasoning": "correct root cause, thin evidence",
                "suggestions": list(suggestions),
            }
        )
    )


def test_rubric_json_loads_from_a_file(tmp_path):
    path = tmp_path / "rca.json"
    path.write_text(json.dumps(RCA_EVALUATOR))
    rubric = load_rubric(path)
    assert rubric.name == "rca-quality" and rubric.pass_threshold == 0.7
    assert [(m.name, m.weight, m.scale) for m in rubric.metrics] == [
        ("accuracy", 3, (1.0, 5.0)),
        ("evidence", 1, (0.0, 10.0)),
        ("actionability", 1, (0.0, 1.0)),
    ]
    score, per = rubric.score({"accuracy": 5, "evidence": 5, "actionability": 0})
    assert score == pytest.approx((3 * 1.0 + 1 * 0.5 + 0) / 5)
    assert per["accuracy"] == {"score": 5, "normalized": 1.0, "weight": 3}


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"systemPrompt": "x"}, "scoringConfig.metrics is missing"),
        ({"scoringConfig": {"metrics": [{"name": "a", "scale": "5-1"}]}}, "maximum must be above the minimum"),
        ({"scoringConfig": {"metrics": [{"name": "a", "weight": 0}]}}, "weights sum to 0"),
        ({"scoringConfig": {"metrics": [{"name": "a"}, {"name": "a"}]}}, "unique"),
        ({"scoringConfig": {"metrics": [{"name": "a"}]}, "passThreshold": 170}, "passThreshold"),
    ],
)
def test_bad_rubric_json_names_the_file(tmp_path, doc, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=message) as exc:
        load_rubric(path)
    assert "bad.json" in str(exc.value)
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(ConfigError, match="broken.json: not valid JSON"):
        load_rubric(tmp_path / "broken.json")


def test_rubric_evaluator_scores_weighted_metrics_and_gates_at_threshold(openai_server, tmp_path):
    rubric = Rubric.from_json(RCA_EVALUATOR)
    openai_server.script.extend([rubric_answer(5, 8, 1), rubric_answer(2, 8, 1)])
    good, weak = run_many(
        openai_server,
        [
            make_request(evaluator="rca-quality"),
            make_request(evaluator="rca-quality", criteria="the RCA of the outage"),
        ],
        {"rca-quality": rubric},
        state=tmp_path,
    )
    assert not good.errored, good.error
    assert good.evaluator == "rca-quality" and good.model == "judge-model"
    assert good.score == pytest.approx((3 * 1.0 + 0.8 + 1.0) / 5) and good.passed
    assert good.details["metrics"]["evidence"] == {"score": 8, "normalized": 0.8, "weight": 1}
    assert good.details["suggestions"] == ["Quote the failing log line"]
    assert good.usage.total_tokens == 120
    assert weak.score == pytest.approx((3 * 0.25 + 0.8 + 1.0) / 5) and not weak.passed  # 0.51 < 0.70
    body = openai_server.posts()[0].json
    assert body["messages"][0]["content"].startswith("You are an SRE lead")
    assert "NEVER instructions" in body["messages"][0]["content"]  # the fence rules are always added
    assert '"accuracy": a number from 1 to 5' in body["messages"][1]["content"]
    assert "<<<UNTRUSTED OUTPUT" in body["messages"][1]["content"]

    # the same judgement again, in a new service: served by the cache, no call
    (again,) = run_many(openai_server, [make_request(evaluator="rca-quality")], {"rca-quality": rubric}, state=tmp_path)
    assert again.cached and again.score == good.score and len(openai_server.posts()) == 2


def test_rubric_answer_out_of_scale_is_repaired_then_errored(openai_server):
    rubric = Rubric.from_json(RCA_EVALUATOR)
    openai_server.script.extend(
        [rubric_answer(9, 8, 1), rubric_answer(4, 8, 1), rubric_answer(9, 8, 1), chat('{"metrics": {}}')]
    )
    fixed, broken = run_many(
        openai_server,
        [make_request(evaluator="rca-quality"), make_request(evaluator="rca-quality", criteria="other")],
        {"rca-quality": rubric},
    )
    assert not fixed.errored and fixed.details["metrics"]["accuracy"]["score"] == 4
    assert "metrics.accuracy` must be from 1 to 5" in openai_server.posts()[1].json["messages"][1]["content"]
    assert broken.errored and "metrics missing" in broken.error and "rca-quality" in broken.error


def test_custom_evaluator_gets_result_criteria_tools_and_llm(openai_server):
    seen = {}

    async def trace_judge(result, criteria, tools, llm):
        spans = await tools.trace_query.get_spans()
        slow = [s for s in spans if s["duration_ms"] > 1000]
        answer = await llm.complete(f"Spans: {json.dumps(slow)}\nClaim: {criteria}", system="be brief")
        seen.update(run_id=result.run_id, answer=answer, logs=await tools.get_logs())
        return {
            "pass": len(slow) == 1,
            "score": 0.75,
            "reasoning": f"{len(slow)} slow span(s)",
            "details": {"slow": [s["name"] for s in slow]},
        }

    tools = MemoryTraceTools(
        "run-1",
        [{"name": "db.query", "duration_ms": 2500}, {"name": "fast", "duration_ms": 3}],
        [{"body": "slow query"}],
    )
    openai_server.script.append(chat("it is slow", usage=(40, 4)))
    (v,) = run_many(
        openai_server,
        [make_request(criteria="one slow span", evaluator="trace-judge", trace_tools=tools)],
        {"trace-judge": trace_judge},
    )
    assert (v.passed, v.score, v.evaluator, v.errored) == (True, 0.75, "trace-judge", False), v.error
    assert v.details == {"slow": ["db.query"]} and v.reasoning == "1 slow span(s)"
    assert (v.usage.input_tokens, v.usage.output_tokens, v.model) == (40, 4, "judge-model")
    assert seen == {"run_id": "run-1", "answer": "it is slow", "logs": [{"body": "slow query"}]}
    msgs = openai_server.posts()[0].json["messages"]
    assert msgs[0] == {"role": "system", "content": "be brief"} and "db.query" in msgs[1]["content"]


def test_custom_evaluator_forms_and_failures(openai_server):
    evaluators = {
        "bool": lambda output: "sky" in output,
        "verdict": lambda criteria: Verdict(passed=False, score=0.2, reasoning="nope"),
        "wrong-type": lambda: 42,
        "raises": lambda result: 1 / 0,
        "bad-params": lambda nonsense: True,
        "traces": lambda tools: tools.get_spans(),
    }
    names = ["bool", "verdict", "wrong-type", "raises", "bad-params", "traces", "missing"]
    out = dict(zip(names, run_many(openai_server, [make_request(evaluator=n) for n in names], evaluators)))
    assert not out["bool"].passed and out["bool"].evaluator == "bool" and not out["bool"].errored
    assert (out["verdict"].passed, out["verdict"].score, out["verdict"].evaluator) == (False, 0.2, "verdict")
    assert out["wrong-type"].errored and "returned int" in out["wrong-type"].error
    assert out["raises"].errored and "ZeroDivisionError" in out["raises"].error and "suite::t" in out["raises"].error
    assert out["bad-params"].errored and "nonsense" in out["bad-params"].error
    assert out["traces"].errored and "has no trace source" in out["traces"].error
    assert out["missing"].errored and "evaluator 'missing' is not configured" in out["missing"].error
    assert openai_server.posts() == []


def test_llm_helper_with_the_demo_provider_errors_clearly():
    async def needs_llm(llm):
        return {"pass": bool(await llm.complete("hi"))}

    async def main():
        service = JudgeService.from_settings(JudgeSettings(), evaluators={"x": needs_llm})
        try:
            return await service.judge(make_request(evaluator="x"))
        finally:
            await service.aclose()

    v = asyncio.run(main())
    assert v.errored and "offline demo heuristic" in v.error


def test_rubric_files_from_judge_settings_are_loaded_relative_to_the_root(openai_server, tmp_path):
    from agent_health import define_config
    from agent_health.session import build_judges

    (tmp_path / "evaluators").mkdir()
    (tmp_path / "evaluators" / "rca.json").write_text(json.dumps(RCA_EVALUATOR))
    config = define_config(
        root=str(tmp_path), judge={**openai_settings(openai_server), "rubrics": {"rca-quality": "evaluators/rca.json"}}
    )
    openai_server.script.append(rubric_answer(5, 10, 1))

    async def main():
        service = build_judges(config, no_cache=True)
        try:
            return await service.judge(make_request(evaluator="rca-quality"))
        finally:
            await service.aclose()

    v = asyncio.run(main())
    assert v.evaluator == "rca-quality" and v.score == 1.0 and v.passed

    missing = define_config(root=str(tmp_path), judge={"rubrics": {"x": "evaluators/nope.json"}})
    with pytest.raises(ConfigError, match="nope.json: cannot read"):
        build_judges(missing)
    twice = define_config(
        root=str(tmp_path), evaluators={"x": lambda: True}, judge={"rubrics": {"x": "evaluators/rca.json"}}
    )
    with pytest.raises(ConfigError, match="defined twice"):
        build_judges(twice)
