"""The agui connector against a real AG-UI agent (official ag-ui-protocol events and encoder)."""

from __future__ import annotations

from tests.connectors.servers import invoke, invoke_error, runtime


def test_event_stream_becomes_trajectory(server):
    before = len(server.requests)
    r = invoke(
        runtime(
            "agui",
            endpoint=server.url + "/agui",
            tools=[{"name": "search_logs", "description": "d", "parameters": {}}],
            state={"phase": "start"},
            forwarded_props={"tenant": "acme"},
        ),
        "why?",
        context=({"description": "log", "value": "refused"},),
    )
    assert r.output == "The payment service cannot reach its DB (why?)."
    # the prompt opens the trajectory; every step says who speaks
    assert [(s.kind, s.role) for s in r.trajectory] == [
        ("message", "user"),
        ("thinking", "assistant"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
        ("message", "assistant"),
    ]
    assert r.trajectory[0].content == "why?"
    think, call, res, _ = r.agent_steps
    assert think.content == "I should check the logs."
    assert (call.tool, call.args, call.call_id) == ("search_logs", {"service": "payment"}, "tc1")
    assert (res.tool, res.call_id, res.content) == ("search_logs", "tc1", "Connection refused to db-primary")
    assert (r.usage.input_tokens, r.usage.output_tokens) == (100, 20)
    types = [e["type"] for e in r.raw_events]
    # STEP_*, STATE_* and unknown events are kept in raw events
    for t in ("RUN_STARTED", "STEP_STARTED", "STATE_SNAPSHOT", "STEP_FINISHED", "VENDOR_SPECIAL", "RUN_FINISHED"):
        assert t in types
    sent = server.requests[before]
    assert sent["headers"]["accept"] == "text/event-stream"
    body = sent["body"]
    assert body["runId"] == r.run_id and body["threadId"].startswith("thread_")
    assert body["messages"][0]["role"] == "user" and body["messages"][0]["content"] == "why?"
    assert body["context"] == [{"description": "log", "value": "refused"}]
    assert body["tools"][0]["name"] == "search_logs" and body["state"] == {"phase": "start"}
    assert body["forwardedProps"] == {"tenant": "acme"}
    assert (
        sent["headers"]["x-agent-health-run-id"] == r.run_id
        and sent["headers"]["traceparent"] == f"00-{r.trace_id}-" + sent["headers"]["traceparent"].split("-")[2] + "-01"
    )
    from ag_ui.core import RunAgentInput

    RunAgentInput.model_validate(body)  # the body is a valid RunAgentInput


def test_legacy_thinking_events_and_message_chunks(server):
    r = invoke(runtime("agui", endpoint=server.url + "/agui-legacy"))
    assert [s.kind for s in r.agent_steps] == ["thinking", "message"]
    assert r.agent_steps[0].content == "hmm" and r.output == "chunked answer"


def test_run_error(server):
    msg = invoke_error(runtime("agui", endpoint=server.url + "/agui-error"))
    assert msg == f"agent agent@v1 ({server.url}/agui-error): RUN_ERROR: model quota exceeded (code QUOTA)"


def test_stream_cut_mid_message(server):
    msg = invoke_error(runtime("agui", endpoint=server.url + "/agui-cut"))
    assert f"({server.url}/agui-cut): stream cut off after 3 events" in msg and "message 'm1' incomplete" in msg


def test_stream_ending_before_run_finished(server):
    msg = invoke_error(runtime("agui", endpoint=server.url + "/agui-early-end"))
    assert "stream ended before RUN_FINISHED after 3 events (message 'm1' incomplete)" in msg


def test_retry_before_stream_starts(server):
    r = invoke(runtime("agui", endpoint=server.url + "/agui-503-once", retry={"backoff_s": 0.01}))
    assert r.output == "ok after retry" and r.usage.retries == 1


def test_non_utf8_event_stream(server):
    msg = invoke_error(runtime("agui", endpoint=server.url + "/agui-latin1"))
    assert "/agui-latin1" in msg and "event stream is not valid UTF-8: byte 0xe9" in msg


def test_oversized_event_stream(server):
    msg = invoke_error(runtime("agui", endpoint=server.url + "/agui", max_response_bytes=500))
    assert "response too large: more than 500 bytes" in msg
