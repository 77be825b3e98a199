"""Agentic judging (tools=['trace_query']) and trace context, with an in-memory trace source."""

from __future__ import annotations

import asyncio

from agent_health.config.model import JudgeSettings
from agent_health.judges.service import JudgeService

from .helpers import MemoryTraceTools, chat, make_request, openai_settings, verdict_json

SPANS = [
    {
        "name": "agent.run",
        "span_id": "a1",
        "trace_id": "t1",
        "start_time": 1.0,
        "duration_ms": 900,
        "attributes": {"gen_ai.usage.input_tokens": 500, "agent_health.run_id": "run-1"},
    },
    {
        "name": "db.connect",
        "span_id": "a2",
        "parent_span_id": "a1",
        "trace_id": "t1",
        "start_time": 1.1,
        "duration_ms": 30,
        "status": "ERROR",
        "attributes": {"db.system": "postgresql", "error": "connection refused"},
    },
]
LOGS = [{"timestamp": 1.2, "severity": "ERROR", "body": "Connection refused to db-primary:5432"}]


def run_one(server, request, **settings):
    async def main():
        service = JudgeService.from_settings(JudgeSettings(**openai_settings(server, **settings)))
        try:
            return await service.judge(request)
        finally:
            await service.aclose()

    return asyncio.run(main())


def test_agentic_loop_calls_trace_tools_and_records_them(openai_server):
    tools = MemoryTraceTools("run-1", SPANS, LOGS)
    openai_server.script.extend(
        [
            chat(None, tool_calls=[{"name": "get_spans"}], usage=(100, 10)),
            chat(
                None,
                tool_calls=[
                    {"name": "query", "args": {"dsl": {"query": {"match": {"name": "db.connect"}}}}},
                    {"name": "query", "args": {"dsl": {"script": "ctx._source.x = 1"}}},
                ],
                usage=(200, 10),
            ),
            chat(verdict_json(True, 0.95, "db.connect span failed with connection refused"), usage=(300, 30)),
        ]
    )
    v = run_one(
        openai_server,
        make_request(criteria="the diagnosis is grounded in the trace data", tools=("trace_query",), trace_tools=tools),
    )
    assert (v.passed, v.score, v.errored) == (True, 0.95, False), v.error
    calls = v.details["tool_calls"]
    assert [c["tool"] for c in calls] == ["get_spans", "query", "query"]
    assert calls[0]["ok"] and calls[0]["records"] == 2 and calls[1]["records"] == 1
    assert calls[2]["ok"] is False and "PermissionError" in calls[2]["error"]
    assert v.details["mode"] == "agentic"
    assert (v.usage.input_tokens, v.usage.output_tokens, v.usage.llm_calls) == (600, 50, 3)

    first, second, third = openai_server.posts()
    assert sorted(t["function"]["name"] for t in first.json["tools"]) == ["get_logs", "get_spans", "metrics", "query"]
    tool_msg = second.json["messages"][-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "call_0"
    assert "<<<UNTRUSTED TOOL_RESULT" in tool_msg["content"] and "db.connect" in tool_msg["content"]
    assert second.json["messages"][-2]["tool_calls"][0]["function"]["name"] == "get_spans"
    results = [m for m in third.json["messages"] if m["role"] == "tool"]
    assert len(results) == 3 and "tool failed: PermissionError" in results[2]["content"]


def test_agentic_loop_is_bounded(openai_server):
    tools = MemoryTraceTools("run-1", SPANS, LOGS)
    openai_server.script.extend(
        [
            chat(None, tool_calls=[{"name": "get_logs"}]),
            chat(None, tool_calls=[{"name": "metrics"}]),
            chat(verdict_json(False, 0.2, "not enough evidence")),
        ]
    )
    v = run_one(openai_server, make_request(tools=("trace_query",), trace_tools=tools), max_tool_steps=2)
    assert (v.passed, v.score, v.errored) == (False, 0.2, False)
    posts = openai_server.posts()
    assert len(posts) == 3
    assert "tool budget is spent" in posts[2].json["messages"][-1]["content"]
    assert [c["tool"] for c in v.details["tool_calls"]] == ["get_logs", "metrics"]


def test_trace_tools_missing_is_errored_with_a_clear_message(openai_server):
    v = run_one(openai_server, make_request(tools=("trace_query",)))
    assert v.errored and "has no trace source" in v.error and "demo@v2" in v.error
    v = run_one(openai_server, make_request(context=("output", "traces")))
    assert v.errored and "traces" in v.error
    assert openai_server.posts() == []


def test_unknown_tool_or_context_item_is_errored(openai_server):
    v = run_one(openai_server, make_request(tools=("shell",)))
    assert v.errored and "shell" in v.error and "trace_query" in v.error
    v = run_one(openai_server, make_request(context=("output", "screenshots")))
    assert v.errored and "screenshots" in v.error


def test_traces_and_logs_in_context_are_fenced_and_scrubbed(openai_server):
    tools = MemoryTraceTools("run-1", SPANS, LOGS)
    v = run_one(openai_server, make_request(context=("output", "traces", "logs"), trace_tools=tools))
    assert not v.errored, v.error
    user = openai_server.posts()[0].json["messages"][1]["content"]
    assert "<<<UNTRUSTED TRACES" in user and "<<<UNTRUSTED LOGS" in user
    assert "db.connect" in user and "Connection refused to db-primary" in user
    assert '"span_id"' not in user and "run-1" not in user  # per-run ids are not evidence
    assert "TRAJECTORY" not in user  # only what the context asked for
