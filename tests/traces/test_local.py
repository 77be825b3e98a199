"""`result.traces` on the embedded span store: the demo agent writes spans, test bodies and judges
read them through a lazy, run-bound view."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent_health import RunSettings, define_config, load_tests, run_evaluation, run_tests
from agent_health.analysis.metrics import shown_signals
from agent_health.judges.base import JudgeProvider
from agent_health.judges.service import JudgeService
from agent_health.model import Verdict
from agent_health.model.judge import JudgeRequest
from agent_health.reporters.base import CallbackReporter
from agent_health.traces.dsl import QueryRejected
from agent_health.traces.local import LocalSpanStore, LocalTraceSource
from agent_health.traces.source import RunRef
from agent_health.traces.view import TracesUnavailable, TracesView

BODY = """
from agent_health import test, expect

@test("payment", prompt="Diagnose why the payment service is failing.")
async def payment(agent):
    result = await agent.run()
    t = result.traces
    assert t.correlation == "trace_id"
    assert t.total_tokens == result.usage.total_tokens
    assert t.input_tokens == result.usage.input_tokens
    assert t.llm_calls == result.usage.llm_calls
    assert t.tool_calls == len(result.tool_calls())
    assert t.span_duration("execute_tool query_traces") == 1600.0
    assert t.cost is not None and t.cost > 0
    assert [l["severity"] for l in t.logs] == ["INFO", "INFO", "INFO"]

@test("kafka", prompt="orders kafka consumer lag is growing")
def kafka(agent):
    result = agent.run()
    expect(result).to_have_called_tool("search_logs")
    assert result.traces.metrics()["tool_errors"] == (1 if result.agent == "demo@v1" else 0)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "traces.eval.py").write_text(BODY)
    return tmp_path


def _run(project: Path, ref: str = "demo@v2", **config: Any) -> list:
    cfg = define_config(root=str(project), **config)
    return run_tests(load_tests([project / "evals"]).tests, cfg, ref)


@pytest.mark.parametrize("ref", ["demo@v1", "demo@v2"])
def test_demo_agent_traces_match_its_run_and_become_observe_metrics(project, ref):
    results = {r.name: r for r in _run(project, ref)}
    if ref == "demo@v1":  # v1 never queries traces: the span_duration assertion fails by name
        assert "no span named 'execute_tool query_traces'" in results["payment"].error
    else:
        assert results["payment"].status == "passed", results["payment"].error
    kafka = results["kafka"]
    assert kafka.status == "passed", kafka.error
    traces = kafka.metrics["traces"]
    assert traces["status"] == "ok" and traces["correlation"] == "trace_id"
    assert traces["total_tokens"] == kafka.metrics["total_tokens"] == kafka.usage.total_tokens
    assert traces["cost_usd"] == kafka.metrics["cost_usd"]
    assert not any(s.kind == "metric" for s in kafka.signals)  # stored once, in `metrics`
    metrics = {s.name: s for s in shown_signals(kafka) if s.kind == "metric"}
    assert {
        "metric:total_tokens",
        "metric:cost_usd",
        "metric:latency_ms",
        "metric:llm_calls",
        "metric:tool_calls",
        "metric:traces.duration_ms",
    } <= set(metrics)
    assert all(s.role == "observe" and s.passed is None for s in metrics.values())
    assert metrics["metric:total_tokens"].value == kafka.usage.total_tokens
    assert "metric:traces.total_tokens" not in metrics  # same as the run's own number: not shown twice
    # problem counters appear when non-zero: v2 repeats a search, v1 ignores a failing tool
    problem = "metric:redundant_calls" if ref == "demo@v2" else "metric:ignored_tool_errors"
    assert metrics[problem].value == 1
    assert kafka.score == 1.0  # metric signals neither gate nor score
    files = sorted(p.name for p in (project / ".agent_health" / "spans").iterdir())
    assert len(files) == 2 and files[0].endswith(".jsonl") and files[1].endswith(".logs.jsonl")
    # another process (a fresh index) reads the same spans from the files
    from agent_health.traces import local

    local.reset()
    again = LocalTraceSource(project / ".agent_health" / "spans").fetch(
        RunRef(run_id=kafka.run_id, trace_id=kafka.run.trace_id)
    )
    assert again.correlation == "trace_id" and len(again.spans) == traces["spans"]


def test_traces_disabled_raise_not_enabled_naming_the_agent(project):
    results = {r.name: r for r in _run(project, traces={"source": "none"})}
    r = results["payment"]
    assert r.status == "errored"
    assert "traces not enabled for agent demo@v2" in r.error
    assert r.metrics["traces"] == {"status": "not_enabled"}
    assert not (project / ".agent_health" / "spans").exists()


def test_missing_spans_wait_then_raise_unavailable_naming_the_run(tmp_path):
    source = LocalTraceSource(tmp_path / "spans")
    view = TracesView(source, RunRef(run_id="run-42", trace_id="a" * 32, agent="x@v1"), wait_s=0.5, poll_s=0.1)
    t0 = time.monotonic()
    with pytest.raises(
        TracesUnavailable,
        match=r"traces unavailable for run run-42 \(agent x@v1\).*after "
        r"waiting 0.5s",
    ):
        _ = view.spans
    assert 0.45 <= time.monotonic() - t0 < 3


def _spans(
    trace_id: str, run_id: str, service: str = "late-agent", start_ms: float = 0.0, n: int = 2
) -> list[dict[str, Any]]:
    root = os.urandom(8).hex()
    out = [
        {
            "trace_id": trace_id,
            "span_id": root,
            "parent_span_id": None,
            "name": "invoke_agent",
            "service": service,
            "start_ms": start_ms,
            "end_ms": start_ms + 1000,
            "duration_ms": 1000.0,
            "status": "OK",
            "attributes": {"agent_health.run.id": run_id, "gen_ai.operation.name": "invoke_agent"},
        }
    ]
    for i in range(n):
        out.append(
            {
                "trace_id": trace_id,
                "span_id": os.urandom(8).hex(),
                "parent_span_id": root,
                "name": "chat m",
                "service": service,
                "start_ms": start_ms + i,
                "end_ms": start_ms + i + 1,
                "duration_ms": 1.0,
                "status": "OK",
                "attributes": {
                    "agent_health.run.id": run_id,
                    "gen_ai.operation.name": "chat",
                    "gen_ai.usage.input_tokens": 10,
                    "gen_ai.usage.output_tokens": 1,
                },
            }
        )
    return out


def test_spans_that_land_late_are_waited_for(tmp_path):
    store = LocalSpanStore(tmp_path / "spans")
    trace_id = os.urandom(16).hex()
    timer = threading.Timer(0.4, store.write_spans, args=(_spans(trace_id, "run-late"),))
    timer.start()
    view = TracesView(LocalTraceSource(store.root), RunRef(run_id="run-late", trace_id=trace_id), wait_s=5, poll_s=0.1)
    assert view.total_tokens == 22
    timer.join()


def test_local_correlation_by_run_id_then_time_window(tmp_path):
    store = LocalSpanStore(tmp_path / "spans")
    now = time.time()
    store.write_spans(_spans(os.urandom(16).hex(), "run-attr"))
    a = [
        dict(s, attributes={k: v for k, v in s["attributes"].items() if k != "agent_health.run.id"})
        for s in _spans(os.urandom(16).hex(), "-", "svc", now * 1000, n=1)
    ]
    b = [
        dict(s, attributes={k: v for k, v in s["attributes"].items() if k != "agent_health.run.id"})
        for s in _spans(os.urandom(16).hex(), "-", "svc", now * 1000 + 400, n=3)
    ]
    store.write_spans(a + b)
    source = LocalTraceSource(store.root)
    found = source.fetch(RunRef(run_id="run-attr", trace_id=os.urandom(16).hex(), started_at=now))
    assert found.correlation == "run_id" and len(found.spans) == 3
    win_a = source.fetch(RunRef(run_id="a", service="svc", started_at=now, duration_ms=1000))
    win_b = source.fetch(RunRef(run_id="b", service="svc", started_at=now + 0.4, duration_ms=1000))
    assert win_a.correlation == win_b.correlation == "time_window"
    assert len(win_a.spans) == 2 and len(win_b.spans) == 4


class CapturingJudge(JudgeProvider):
    """A judge that uses the trace tools it is given, as an agentic judge would."""

    name = "capturing"

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def evaluate(self, request: JudgeRequest) -> Verdict:
        tools = request.trace_tools
        own = await tools.query({"query": {"match_all": {}}, "size": 1000})
        try:
            await tools.query({"query": {"script": {"script": "1"}}})
            rejected = False
        except QueryRejected:
            rejected = True
        self.seen.append(
            {
                "run_id": tools.run_id,
                "metrics": await tools.metrics(),
                "traces": {s["trace_id"] for s in own},
                "trace_id": request.run.trace_id,
                "rejected": rejected,
                "logs": len(await tools.get_logs()),
            }
        )
        return Verdict(passed=True, score=1.0, criteria=request.criteria, evaluator=self.name)


def test_judges_get_run_scoped_trace_tools(project):
    (project / "evals" / "traces.eval.py").write_text("""
from agent_health import test

@test("one", prompt="Diagnose why the payment service is failing.")
async def one(agent, judge):
    await judge(await agent.run(), "finds the database")

@test("two", prompt="orders kafka consumer lag is growing")
async def two(agent, judge):
    await judge(await agent.run(), "finds the rebalance loop")
""")
    cfg = define_config(root=str(project))
    provider = CapturingJudge()

    results: list = []
    asyncio.run(
        run_evaluation(
            load_tests([project / "evals"]).tests,
            cfg,
            RunSettings(agents=("demo@v2",), store=None),
            reporters=[CallbackReporter(results.append)],
            judges=JudgeService(provider),
        )
    )
    assert all(r.status == "passed" for r in results), [r.error for r in results]
    assert len(provider.seen) == 2
    for seen in provider.seen:
        assert seen["traces"] == {seen["trace_id"]}  # only its own run's spans
        assert seen["rejected"] and seen["logs"] >= 3 and seen["metrics"]["llm_calls"] >= 4


def test_bad_spans_or_trace_settings_are_recorded_not_fatal(tmp_path, monkeypatch):
    from agent_health.analysis.metrics import trace_metrics
    from agent_health.traces.opensearch import OpenSearchTraceSource

    store = LocalSpanStore(tmp_path / "spans")
    trace_id = os.urandom(16).hex()
    store.write_spans([{"trace_id": trace_id, "span_id": "1", "name": "x", "attributes": "not a mapping"}])
    view = TracesView(LocalTraceSource(store.root), RunRef(run_id="run-bad", trace_id=trace_id), wait_s=0)
    out = trace_metrics(view)
    assert out["status"] == "unavailable" and "could not read spans of run run-bad" in out["error"]

    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    settings = {"url": "http://127.0.0.1:9", "auth": {"type": "sigv4", "region": ""}}
    view = TracesView(OpenSearchTraceSource(settings), RunRef(run_id="run-cfg", trace_id=trace_id))
    out = trace_metrics(view)
    assert out["status"] == "unavailable" and "traces.settings.auth: sigv4 needs a region" in out["error"]


def test_replayed_runs_read_the_original_runs_spans(project):
    first = {r.name: r for r in _run(project, replay="record")}
    again = {r.name: r for r in _run(project, replay="strict")}
    kafka = again["kafka"]
    assert kafka.run.replayed and kafka.run.trace_id == first["kafka"].run.trace_id
    assert kafka.status == "passed", kafka.error
    assert kafka.metrics["traces"]["status"] == "ok"
    assert kafka.metrics["traces"]["total_tokens"] == first["kafka"].metrics["traces"]["total_tokens"]
