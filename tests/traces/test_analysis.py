"""Derived metrics, offline insights, the optional synthesizer and the suite rollup."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent_health import define_config, load_tests, run_tests
from agent_health.analysis.insights import (
    SYNTH_RULE,
    LLMSynthesizer,
    insights_analyzer,
    rollup_recommendations,
)
from agent_health.analysis.metrics import run_metrics
from agent_health.errors import ConfigError
from agent_health.model import Insight, RunResult, Step, TestResult, Usage
from agent_health.traces import trace_view_factory
from agent_health.traces.spans import span_metrics
from tests.judges.helpers import fenced

EVAL = """
from agent_health import test, expect

@test("kafka", prompt="orders kafka consumer lag is growing")
def kafka(agent):
    expect(agent.run()).to_have_called_tool("search_logs")

@test("payment", prompt="Diagnose why the payment service is failing.")
def payment(agent):
    expect(agent.run().output).to_match("nothing like this")
"""


def _run(steps: list[Step], **kw: Any) -> RunResult:
    return RunResult(run_id="r", trajectory=tuple(steps), usage=Usage.of(100, 10, model="gpt-4o"), **kw)


def test_near_same_arguments_count_as_redundant_and_retries_are_counted():
    m = run_metrics(
        _run(
            [
                Step(kind="tool_call", tool="search", args={"service": "Payment-Service ", "tags": ["a", "b"]}),
                Step(kind="tool_result", tool="search", content="x", duration_ms=10),
                Step(kind="tool_call", tool="search", args={"service": "payment service", "tags": ["b", "a"]}),
                Step(kind="tool_result", tool="search", content="x", duration_ms=30),
                Step(kind="tool_call", tool="metrics", args={"name": "lag"}),
                Step(kind="tool_result", tool="metrics", content="error", is_error=True, duration_ms=5),
                Step(kind="tool_call", tool="metrics", args={"name": "rebalances"}),
                Step(kind="tool_result", tool="metrics", content="ok", duration_ms=5),
                Step(kind="tool_call", tool="search", args={"service": "checkout"}),
            ]
        )
    )
    assert m["redundant_calls"] == 1
    assert m["tool_histogram"] == {"search": 3, "metrics": 2} and m["distinct_tools"] == 2
    assert m["tool_errors"] == 1 and m["ignored_tool_errors"] == 0 and m["tool_retries"] == 1
    assert m["tool_latency_ms"] == {"search": 40.0, "metrics": 10.0}
    assert m["slowest_step"]["duration_ms"] == 30 and m["step_latency_ms"][:4] == [None, 10, None, 30]
    assert m["cost_usd"] == pytest.approx((100 * 2.5 + 10 * 10) / 1e6)


def test_span_usage_counts_only_the_innermost_spans_that_carry_it():
    def span(sid: str, parent: str | None, i: int = 0, o: int = 0, op: str | None = None) -> dict[str, Any]:
        attrs: dict[str, Any] = {"gen_ai.operation.name": op} if op else {}
        if i or o:
            attrs.update(
                {"gen_ai.usage.input_tokens": i, "gen_ai.usage.output_tokens": o, "gen_ai.request.model": "gpt-4o-mini"}
            )
        return {"span_id": sid, "parent_span_id": parent, "name": sid, "attributes": attrs, "duration_ms": 1.0}

    spans = [
        span("agent", None, 350, 35, "invoke_agent"),
        span("step", "agent", 350, 35),
        span("llm1", "step", 100, 10, "chat"),
        span("llm2", "step", 250, 25, "chat"),
        span("tool", "agent", op="execute_tool"),
    ]
    m = span_metrics(spans)
    assert (m["input_tokens"], m["output_tokens"], m["llm_calls"], m["tool_calls"]) == (350, 35, 2, 1)
    unpriced = span_metrics([dict(spans[2], attributes={**spans[2]["attributes"], "gen_ai.request.model": "x"})])
    assert unpriced["cost_usd"] is None and unpriced["unpriced_models"] == ["x"]  # never guessed


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "s.eval.py").write_text(EVAL)
    return tmp_path


def _results(project: Path, ref: str = "demo@v2", **config: Any) -> dict[str, TestResult]:
    cfg = define_config(root=str(project), **config)
    return {r.name: r for r in run_tests(load_tests([project / "evals"]).tests, cfg, ref)}


def test_offline_insights_always_have_evidence_and_a_recommendation(project):
    results = _results(project)
    kafka, payment = results["kafka"], results["payment"]
    assert [i.rule for i in kafka.insights] == ["redundant_calls"]
    assert kafka.insights[0].evidence["redundant_calls"] == 1
    assert payment.status == "failed" and payment.insights[0].rule == "failed_gates"
    assert all(i.recommendation for r in results.values() for i in r.insights)


def test_a_callable_synthesizer_gets_the_whole_result_and_the_trace_tools(project):
    seen: list[Any] = []

    async def synthesizer(data):  # async, called from inside the engine's event loop
        spans = await data.tools.get_spans()
        seen.append((data.result.name, len(data.trajectory), len(spans), data.metrics["total_tokens"]))
        return {
            "summary": f"{data.result.name}: {len(spans)} spans",
            "why": "because",
            "recommendations": ["Cache search results", {"text": "List metrics first", "severity": "warning"}],
        }

    results = _results(project, insights=synthesizer)
    assert sorted(s[0] for s in seen) == ["kafka", "payment"] and all(s[1] > 0 and s[2] > 0 for s in seen)
    kafka = results["kafka"]
    rules = [i.rule for i in kafka.insights]
    assert rules == ["redundant_calls", "synthesis", SYNTH_RULE, SYNTH_RULE]
    summary = kafka.insights[1]
    assert summary.summary.startswith("kafka: ") and summary.evidence["why"] == "because"
    assert [(i.evidence["rank"], i.severity) for i in kafka.insights[2:]] == [(1, "info"), (2, "warning")]


def test_a_failing_synthesizer_is_reported_not_fatal(project):
    def broken(data):
        raise RuntimeError("model quota exceeded")

    kafka = _results(project, insights=broken)["kafka"]
    assert kafka.status == "passed"
    assert kafka.insights[-1].rule == "synthesizer_error"
    assert "model quota exceeded" in kafka.insights[-1].summary


class RecordingLLM:
    """Any object with complete() is accepted (the judges' cached LLM in real runs)."""

    def __init__(self) -> None:
        self.prompts: list[tuple[str, str | None, bool]] = []

    async def complete(self, prompt: str, *, system: str | None = None, json_mode: bool = False) -> str:
        self.prompts.append((prompt, system, json_mode))
        doc = json.loads(fenced(prompt, "EVALUATION"))
        return (
            "```json\n"
            + json.dumps(
                {
                    "summary": f"{doc['test']['name']} {doc['test']['status']}",
                    "why": f"{len(doc['trajectory'])} steps, {len(doc['spans'])} spans",
                    "recommendations": [{"text": "Stop repeating search_logs", "severity": "warning"}],
                }
            )
            + "\n```"
        )


def test_llm_synthesizer_sends_result_metrics_trajectory_and_spans(project):
    llm = RecordingLLM()
    with pytest.raises(ConfigError, match="insights='llm' needs a judge provider with an LLM"):
        insights_analyzer("llm", llm=None)
    analyze = insights_analyzer("llm", llm=llm)
    kafka = _results(project)["kafka"]
    cfg = define_config(root=str(project))
    traces = trace_view_factory(cfg)(kafka.run, cfg.agent(kafka.agent))  # as the engine hands it over
    out = asyncio.run(analyze(kafka, traces))
    prompt, system, json_mode = llm.prompts[0]
    doc = json.loads(fenced(prompt, "EVALUATION"))
    assert json_mode and "JSON" in system
    assert doc["test"]["name"] == "kafka" and doc["metrics"]["redundant_calls"] == 1
    assert [s["tool"] for s in doc["trajectory"] if s["kind"] == "tool_call"][:2] == ["search_logs", "search_logs"]
    assert any(s["name"].startswith("execute_tool") for s in doc["spans"])
    assert [i.rule for i in out.insights] == ["redundant_calls", "synthesis", SYNTH_RULE]
    assert out.insights[1].summary == "kafka passed"


def test_rollup_ranks_by_tests_then_cost_and_counts_a_test_once():
    def result(test_id: str, cost: float, *insights: Insight) -> TestResult:
        return TestResult(
            test_id=test_id,
            name=test_id,
            suite="s",
            source_file="s.eval.py",
            agent="a@1",
            status="passed",
            cost_usd=cost,
            insights=insights,
        )

    red = Insight(rule="redundant_calls", summary="x", recommendation="Reuse results")
    slow = Insight(rule="slow_step", summary="y", recommendation="Parallelize")
    rec = lambda text: Insight(rule=SYNTH_RULE, summary=text, recommendation=text)  # noqa: E731
    rows = rollup_recommendations(
        [
            result("t1", 0.01, red, red, rec("Cache  search results")),
            result("t2", 0.02, slow, rec("cache search results")),
            result("t3", 0.50, slow, rec("Add retries")),
        ]
    )
    assert [(r["rule"], r["count"]) for r in rows][:2] == [("slow_step", 2), (SYNTH_RULE, 2)]
    assert rows[0]["cost_usd"] == pytest.approx(0.52) and rows[0]["tests"] == ["t2", "t3"]
    assert [(r["rule"], r["tests"]) for r in rows[2:]] == [(SYNTH_RULE, ["t3"]), ("redundant_calls", ["t1"])]
    assert [r["recommendation"] for r in rows if r["rule"] == SYNTH_RULE] == ["cache search results", "Add retries"]


def test_llm_synthesizer_rejects_objects_without_complete():
    with pytest.raises(TypeError, match="complete"):
        LLMSynthesizer(object())


def test_llm_synthesizer_on_the_judge_model_goes_through_the_judge_cache(project):
    from tests.judges.helpers import ScriptedServer, chat

    server = ScriptedServer()

    def reply(rec):
        if "You diagnose AI agent evaluation results" in json.dumps(rec.json["messages"]):
            doc = json.loads(fenced(rec.json["messages"][-1]["content"], "EVALUATION"))
            return chat(
                json.dumps(
                    {
                        "summary": f"{doc['test']['name']}: {doc['test']['status']}",
                        "why": "w",
                        "recommendations": [{"text": "Reuse earlier search results"}],
                    }
                )
            )
        return chat(json.dumps({"pass": True, "score": 1.0, "reasoning": "ok"}))

    server.default = reply
    try:
        config = {
            "insights": "llm",
            "judge": {"provider": "openai", "model": "judge-model", "settings": {"base_url": server.url + "/v1"}},
        }
        first = _results(project, **config)
        assert first["kafka"].insights[1].summary == "kafka: passed"
        assert first["payment"].insights[-1].recommendation == "Reuse earlier search results"
        calls = len(server.posts())
        assert calls == 2  # one synthesis per test, made on the engine's event loop
        again = _results(project, **config)
        assert len(server.posts()) == calls  # the same prompts are served from the judge cache
        assert [i.summary for i in again["kafka"].insights] == [i.summary for i in first["kafka"].insights]
    finally:
        server.close()
