"""The http connector against a real REST agent on 127.0.0.1: shapes, request contents, auth, faults."""

from __future__ import annotations

import base64
import re
import time

import pytest

from agent_health.errors import ConfigError
from tests.connectors.servers import (
    SIGV4_KEY_ID,
    SIGV4_REGION,
    SIGV4_SECRET,
    SIGV4_SERVICE,
    invoke,
    invoke_error,
    runtime,
)
from tests.support import free_port


def test_common_shape_becomes_trajectory_and_usage(server):
    r = invoke(runtime("http", endpoint=server.url + "/chat"), "why is payment down?")
    assert r.output == "answer to: why is payment down?"
    assert [(s.kind, s.role) for s in r.trajectory] == [
        ("message", "user"),
        ("thinking", "assistant"),
        ("tool_call", "assistant"),
        ("tool_result", "tool"),
        ("message", "assistant"),
    ]
    assert r.trajectory[0].content == "why is payment down?"
    call, res = r.trajectory[2], r.trajectory[3]
    assert (call.tool, call.args, call.call_id) == ("search_logs", {"q": "why is payment down?"}, "c1")
    assert (res.call_id, res.content) == ("c1", "ERROR db refused")
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.model) == (12, 7, "rest-model-1")
    assert r.agent == "agent@v1" and r.run_id and r.usage.retries == 0
    assert r.raw_events[0]["status"] == 200


def test_openai_chat_completion_with_tool_calls(server):
    r = invoke(runtime("http", endpoint=server.url + "/openai"))
    assert r.output == "Checking the database."
    call = r.first_tool_call("query_metrics")
    assert call is not None and call.args == {"metric": "db_connections"} and call.call_id == "call_9"
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.model, r.usage.llm_calls) == (30, 9, "gpt-test", 1)


def test_configured_response_paths(server):
    r = invoke(
        runtime(
            "http",
            endpoint=server.url + "/nested",
            response_paths={"output": "data.result.text", "tool_calls": "data.calls"},
        )
    )
    assert r.output == "nested answer"
    assert r.tool_calls("t")[0].args == {"a": 1}
    msg = invoke_error(runtime("http", endpoint=server.url + "/nested", response_paths={"output": "data.missing"}))
    assert "agent@v1" in msg and "/nested" in msg and "no value at output path 'data.missing'" in msg


def test_plain_text_response(server):
    assert invoke(runtime("http", endpoint=server.url + "/text")).output == "plain text answer"


def test_default_body_trace_headers_and_extra_fields(server):
    r = invoke(
        runtime("http", endpoint=server.url + "/echo", model="m-7", body={"temperature": 0}, headers={"x-team": "sre"}),
        "q?",
        context=({"description": "log", "value": "boom"},),
        provisioned={"ticket": 42},
    )
    got = r.raw_events[0]["body"]["received"]
    headers = {k.lower(): v for k, v in got["headers"].items()}
    assert got["body"] == {
        "prompt": "q?",
        "context": [{"description": "log", "value": "boom"}],
        "run_id": r.run_id,
        "model": "m-7",
        "provisioned": {"ticket": 42},
        "temperature": 0,
    }
    assert headers["x-agent-health-run-id"] == r.run_id
    assert headers["traceparent"] == f"00-{r.trace_id}-" + headers["traceparent"].split("-")[2] + "-01"
    assert len(headers["traceparent"].split("-")[2]) == 16 and headers["x-team"] == "sre"
    # W3C trace context: lowercase hex ids of 128 and 64 bits, zero-padded (random_hex)
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", headers["traceparent"])
    assert re.fullmatch(r"[0-9a-f]{32}", r.run_id) and r.run_id != r.trace_id


def test_body_template(server):
    tpl = {
        "input": {"question": "{{prompt}}", "history": "{{messages}}"},
        "meta": "run={{run_id}}",
        "ticket": "{{provisioned.ticket}}",
    }
    r = invoke(runtime("http", endpoint=server.url + "/echo", body_template=tpl), "hi", provisioned={"ticket": 7})
    body = r.raw_events[0]["body"]["received"]["body"]
    assert body == {
        "input": {"question": "hi", "history": [{"role": "user", "content": "hi"}]},
        "meta": f"run={r.run_id}",
        "ticket": 7,
    }
    msg = invoke_error(runtime("http", endpoint=server.url + "/echo", body_template={"q": "{{nope}}"}))
    assert "unknown placeholder {{nope}}" in msg and "agent@v1" in msg


def test_hooks_change_request_and_read_response(server):
    from tests.connectors import py_agent

    rt = runtime(
        "http",
        endpoint=server.url + "/echo",
        before_request="tests.connectors.py_agent:hooked_before",
        after_response=py_agent.hooked_after,
    )
    r = invoke(rt, provisioned={"ticket": "T-9"})
    received = r.raw_events[0]["body"]["received"]
    assert received["body"]["provisioned_token"] == "T-9"
    assert {k.lower(): v for k, v in received["headers"].items()}["x-ticket"] == "T-9"
    assert r.output == "echoed [after]" and py_agent.SEEN[-1] == 200


def test_bearer_api_key_and_basic_auth_reach_agent_but_not_result(server, monkeypatch):
    monkeypatch.setenv("T_TOKEN", "tok-bearer-123456")
    monkeypatch.setenv("T_KEY", "key-abcdef-98765")
    monkeypatch.setenv("T_PASS", "pw-s3cret-555")
    cases = [
        ({"type": "bearer", "token": {"env": "T_TOKEN"}}, "authorization", "Bearer tok-bearer-123456"),
        ({"type": "api_key", "header": "x-api-key", "value": "${T_KEY}"}, "x-api-key", "key-abcdef-98765"),
        (
            {"type": "basic", "username": "bob", "password": {"env": "T_PASS"}},
            "authorization",
            "Basic " + base64.b64encode(b"bob:pw-s3cret-555").decode(),
        ),
    ]
    for auth, header, expected in cases:
        before = len(server.requests)
        r = invoke(runtime("http", endpoint=server.url + "/echo", auth=auth))
        sent = {k.lower(): v for k, v in server.requests[before]["headers"].items()}
        assert sent[header] == expected  # the agent got the real credential
        dumped = r.model_dump_json()
        assert "[REDACTED]" in dumped
        for secret in ("tok-bearer-123456", "key-abcdef-98765", "pw-s3cret-555", expected.split(" ")[-1]):
            assert secret not in dumped


def test_sigv4_signature_verified_by_server(server):
    auth = {
        "type": "sigv4",
        "region": SIGV4_REGION,
        "service": SIGV4_SERVICE,
        "access_key_id": SIGV4_KEY_ID,
        "secret_access_key": SIGV4_SECRET,
    }
    r = invoke(runtime("http", endpoint=server.url + "/sigv4", auth=auth), "signed prompt")
    assert r.output == "signed ok"
    msg = invoke_error(
        runtime("http", endpoint=server.url + "/sigv4", auth={**auth, "secret_access_key": "wrong-secret-key-value"})
    )
    assert "HTTP 403" in msg and "signature mismatch: signature does not match" in msg
    assert "wrong-secret-key-value" not in msg


def test_sigv4_signs_after_before_request_hook(server):
    auth = {
        "type": "sigv4",
        "region": SIGV4_REGION,
        "service": SIGV4_SERVICE,
        "access_key_id": SIGV4_KEY_ID,
        "secret_access_key": SIGV4_SECRET,
    }
    r = invoke(
        runtime(
            "http", endpoint=server.url + "/sigv4", auth=auth, before_request="tests.connectors.py_agent:hooked_before"
        ),
        provisioned={"ticket": 1},
    )
    assert r.output == "signed ok"


# -- faults: each ends in an AgentError naming agent, endpoint and cause ---------------------
def test_connection_refused(server):
    url = f"http://127.0.0.1:{free_port()}/agent"
    msg = invoke_error(runtime("http", endpoint=url, retry={"max_retries": 2, "backoff_s": 0.01}))
    assert msg.startswith(f"agent agent@v1 ({url}): connection refused")
    assert "gave up after 3 attempts" in msg


def test_500_is_retried_then_reported(server):
    before = server.counts["500"]
    msg = invoke_error(runtime("http", endpoint=server.url + "/500", retry={"max_retries": 2, "backoff_s": 0.01}))
    assert server.counts["500"] - before == 3
    assert f"({server.url}/500): HTTP 500" in msg and "database exploded" in msg and "after 3 attempts" in msg


def test_429_with_retry_after_then_success(server):
    t0 = time.perf_counter()
    r = invoke(runtime("http", endpoint=server.url + "/429", retry={"max_retries": 3, "backoff_s": 0}))
    assert r.output == "finally" and r.usage.retries == 1
    assert time.perf_counter() - t0 >= 0.95  # waited for Retry-After: 1, not the zero backoff


def test_slow_response_past_request_timeout(server):
    t0 = time.perf_counter()
    msg = invoke_error(runtime("http", endpoint=server.url + "/slow", request_timeout_s=0.3))
    assert "agent@v1" in msg and "/slow" in msg and "no response within request_timeout_s=0.3s" in msg
    assert time.perf_counter() - t0 < 2


def test_run_timeout_caps_retries(server):
    msg = invoke_error(
        runtime(
            "http",
            endpoint=server.url + "/500",
            timeout_s=1.0,
            retry={"max_retries": 50, "backoff_s": 0.2, "max_backoff_s": 0.2},
        )
    )
    # the run stops within its budget (at a backoff that does not fit what is left, or at the
    # limit itself, depending on the jitter) and names the failure that used it up
    assert "timeout_s=1s" in msg and "HTTP 500" in msg


def test_malformed_json(server):
    msg = invoke_error(runtime("http", endpoint=server.url + "/malformed"))
    assert "/malformed" in msg and "malformed JSON response" in msg and "half an obj" in msg


@pytest.mark.parametrize(
    "path, expected",
    [
        ("/big", "response too large: Content-Length 200016 exceeds max_response_bytes=1000"),
        ("/big-chunked", "response too large: more than 100000 bytes exceeds max_response_bytes=100000"),
    ],
)
def test_oversized_body(server, path, expected):
    cap = 1000 if path == "/big" else 100_000
    msg = invoke_error(runtime("http", endpoint=server.url + path, max_response_bytes=cap))
    assert path in msg and expected in msg


def test_non_utf8_bytes(server):
    msg = invoke_error(runtime("http", endpoint=server.url + "/latin1"))
    assert "/latin1" in msg and "not valid UTF-8 text: byte 0xe9 at offset 17" in msg


def test_http_error_body_is_scrubbed_of_credentials(server, monkeypatch):
    monkeypatch.setenv("T_TOKEN", "tok-echoed-in-401")
    msg = invoke_error(runtime("http", endpoint=server.url + "/deny", auth={"type": "bearer", "token": "${T_TOKEN}"}))
    assert "HTTP 401" in msg and "tok-echoed-in-401" not in msg and "[REDACTED]" in msg


# -- configuration errors name the setting ---------------------------------------------------
def test_missing_env_var_names_setting_and_variable(monkeypatch):
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(
        ConfigError,
        match=r"setting agents\.agent\.settings\.auth\.token: environment variable "
        r"NOT_SET_ANYWHERE is not set",
    ):
        runtime("http", endpoint="http://127.0.0.1:1/", auth={"type": "bearer", "token": {"env": "NOT_SET_ANYWHERE"}})


def test_unknown_or_invalid_setting_named():
    with pytest.raises(ConfigError, match=r"agents\.agent\.settings\.endpiont: Extra inputs are not permitted"):
        runtime("http", endpoint="http://x/", endpiont="typo")
    with pytest.raises(ConfigError, match=r"agents\.agent\.settings\.auth\.token is required"):
        runtime("http", endpoint="http://x/", auth={"type": "bearer"})
    with pytest.raises(ConfigError, match=r"agents\.agent\.settings\.endpoint: Field required"):
        runtime("http")


def test_endpoint_from_env_reference_is_named_by_reference(monkeypatch):
    monkeypatch.setenv("AGENT_URL", f"http://127.0.0.1:{free_port()}/secret-path-token-x1")
    msg = invoke_error(runtime("http", endpoint={"env": "AGENT_URL"}, retry={"max_retries": 0}))
    assert msg.startswith("agent agent@v1 (${AGENT_URL}): connection refused") and "secret-path" not in msg


def test_the_tests_env_travels_in_the_request_body(server):
    """A REST agent has no process env: `agent.run(env=...)` reaches it in the body (it was dropped)."""
    before = len(server.requests)
    invoke(runtime("http", endpoint=server.url + "/chat"), "why?", env={"REGION": "eu-west-1", "TIER": "gold"})
    assert server.requests[before]["body"]["env"] == {"REGION": "eu-west-1", "TIER": "gold"}
    invoke(runtime("http", endpoint=server.url + "/chat"), "why?")
    assert "env" not in server.requests[before + 1]["body"]  # none given, none sent
    invoke(
        runtime("http", endpoint=server.url + "/chat", body_template={"q": "{{prompt}}", "vars": "{{env}}"}),
        "why?",
        env={"REGION": "us-east-1"},
    )
    assert server.requests[before + 2]["body"] == {"q": "why?", "vars": {"REGION": "us-east-1"}}
