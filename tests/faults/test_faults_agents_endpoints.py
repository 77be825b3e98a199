"""Fault classes of agent endpoints: answers in a content type or shape the connector does not read
(an HTML login page with HTTP 200 above all), a rate limit longer than the run's budget, and
endpoint URLs that are not http(s) URLs. Every one must end `errored` (or, for URLs, refused when
the agent is built, before any test runs) with a message that names the cause. Real agents on
127.0.0.1, real CLI processes."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from email.utils import formatdate
from urllib.parse import urlsplit

import pytest

from agent_health.errors import ConfigError
from tests.connectors.servers import invoke, invoke_error, runtime
from tests.support import LocalHTTPServer, QuietHandler
from tests.support.cli import cli_in_process

HTML = b"<!DOCTYPE html>\n<html><head><title>Sign in - Corp SSO</title></head><body><form>...</form></body></html>"
SSE_OK = (
    b'data: {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}\n\n'
    b'data: {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "fine"}\n\n'
    b'data: {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}\n\n'
)

# path: (status, content type or None, body, extra headers)
ROUTES: dict[str, tuple[int, str | None, bytes, dict[str, str]]] = {
    "/html": (200, "text/html; charset=utf-8", HTML, {}),
    "/html-as-text": (200, "text/plain", HTML, {}),
    "/html-no-type": (200, None, HTML, {}),
    "/xml": (200, "application/xml", b"<?xml version='1.0'?><error>maintenance</error>", {}),
    "/binary": (200, "application/octet-stream", b"\x89PNG\r\n\x1a\n\x00\x00", {}),
    "/json-no-answer": (200, "application/json", b'{"status": "accepted", "job_id": 42}', {}),
    "/json-number": (200, "application/json", b"42", {}),
    "/json-list": (200, "application/json", b"[1, 2, 3]", {}),
    "/json-broken": (200, "application/json", b'{"response": "cut', {}),
    "/text": (200, "text/plain; charset=utf-8", b"The payment service cannot reach its database.", {}),
    "/json": (200, "application/json", b'{"response": "The database is down."}', {}),
    "/agui-html": (200, "text/html", HTML, {}),
    "/agui-json": (200, "application/json", b'{"error": "use the /v2 endpoint"}', {}),
    "/agui-no-type": (200, None, HTML, {}),
    "/agui": (200, "text/event-stream", SSE_OK, {}),
    "/limited": (429, "application/json", b'{"error": "quota exceeded"}', {"Retry-After": "120"}),
    # answers that hold no answer
    "/no-content": (204, None, b"", {}),
    "/empty-200": (200, "application/json", b"", {}),
    "/output-null": (200, "application/json", b'{"output": null}', {}),
    "/output-blank": (200, "application/json", b'{"response": "  ", "thinking": "hmm"}', {}),
    "/agui-finished-first": (
        200,
        "text/event-stream",
        b'data: {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}\n\n'
        b'data: {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}\n\n',
        {},
    ),
}


class Handler(QuietHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        path = urlsplit(self.path).path
        self.server.hits.append(path)  # type: ignore[attr-defined]
        if path == "/limited-date":
            when = formatdate(time.time() + 600, usegmt=True)
            return self.reply(429, "text/plain", b"slow down", {"Retry-After": when})
        if path == "/unavailable-then-slow":  # one 503, then an answer that never comes in time
            if self.server.hits.count(path) == 1:  # type: ignore[attr-defined]
                return self.reply(503, "text/plain", b"warming up", {"Retry-After": "0.2"})
            time.sleep(3)
        self.reply(*ROUTES[path])

    def reply(self, status: int, ctype: str | None, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        if ctype:
            self.send_header("content-type", ctype)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def agent() -> Iterator[LocalHTTPServer]:
    with LocalHTTPServer(Handler) as srv:
        srv.hits = []  # type: ignore[attr-defined]
        yield srv


def http_error(agent: LocalHTTPServer, path: str, **settings) -> str:
    return invoke_error(runtime("http", endpoint=agent.url + path, retry={"max_retries": 0}, **settings))


@pytest.mark.parametrize(
    "path, ctype",
    [
        ("/html", "text/html; charset=utf-8"),
        ("/html-as-text", "text/plain"),
        ("/html-no-type", "none"),
        ("/xml", "application/xml"),
        ("/binary", "application/octet-stream"),
    ],
)
def test_a_200_in_a_content_type_the_connector_does_not_read_is_errored(agent, path, ctype):
    message = http_error(agent, path)
    assert f"({agent.url}{path})" in message  # the endpoint
    assert f"unexpected response: HTTP 200 with content type {ctype!r}" in message
    assert "expected JSON or plain text" in message
    if path.startswith("/html"):
        assert "body starts '<!DOCTYPE html> <html><head><title>Sign in - Corp SSO" in message


@pytest.mark.parametrize(
    "path, problem",
    [
        ("/json-no-answer", "a JSON object without any answer field"),
        ("/json-number", "a JSON int where an answer was expected"),
        ("/json-list", "a JSON list where an answer was expected"),
        ("/json-broken", "malformed JSON response"),
    ],
)
def test_json_in_a_shape_the_connector_does_not_read_is_errored(agent, path, problem):
    message = http_error(agent, path)
    assert problem in message and "HTTP 200" in message and f"{agent.url}{path}" in message
    assert "body starts" in message
    if path == "/json-no-answer":
        assert "its keys: status, job_id" in message and "set response_paths" in message


def test_plain_text_and_json_answers_still_work(agent):
    assert invoke(runtime("http", endpoint=agent.url + "/text")).output.startswith("The payment service")
    assert invoke(runtime("http", endpoint=agent.url + "/json")).output == "The database is down."
    # a configured path says where the answer is, whatever the other fields
    rt = runtime("http", endpoint=agent.url + "/json-no-answer", response_paths={"output": "status"})
    assert invoke(rt).output == "accepted"


@pytest.mark.parametrize(
    "path, ctype",
    [("/agui-html", "text/html"), ("/agui-json", "application/json"), ("/agui-no-type", "none")],
)
def test_agui_answers_that_are_not_an_event_stream_are_errored(agent, path, ctype):
    message = invoke_error(runtime("agui", endpoint=agent.url + path, retry={"max_retries": 0}))
    assert f"({agent.url}{path})" in message
    assert f"unexpected response: HTTP 200 with content type {ctype!r}" in message
    assert "expected text/event-stream" in message and "body starts" in message
    assert invoke(runtime("agui", endpoint=agent.url + "/agui")).output == "fine"


@pytest.mark.parametrize("path, asked", [("/limited", "120s"), ("/limited-date", "(599|600)s")])
@pytest.mark.parametrize("connector", ["http", "agui"])
def test_a_retry_after_beyond_the_run_budget_names_the_rate_limit_at_once(agent, path, asked, connector):
    t0 = time.monotonic()
    message = invoke_error(runtime(connector, endpoint=agent.url + path, timeout_s=5))
    assert time.monotonic() - t0 < 2  # no pointless wait for a budget that cannot cover the wait
    assert "HTTP 429 (rate limited)" in message and re.search(f"Retry-After asks for {asked} but", message)
    assert "of the run's timeout_s=5s are left" in message and "did not finish" not in message


def test_a_run_that_times_out_after_a_failed_attempt_names_that_attempt(agent):
    message = invoke_error(runtime("http", endpoint=agent.url + "/unavailable-then-slow", timeout_s=1))
    assert "run did not finish within timeout_s=1s" in message
    assert "1 failed attempt, the last: HTTP 503: warming up" in message


@pytest.mark.parametrize(
    "endpoint, problem",
    [
        ("ftp://agents.example.com/rca", "scheme ftp:// is not supported; use http:// or https://"),
        ("not a url", "not a URL: expected http:// or https://host[:port]/path"),
        ("http:///rca", "the URL has no host"),
        ("https://agents.example.com:port/rca", "not a valid URL"),
    ],
)
@pytest.mark.parametrize("connector", ["http", "agui"])
def test_endpoint_urls_are_checked_when_the_agent_is_built(endpoint, problem, connector):
    with pytest.raises(ConfigError) as info:
        runtime(connector, endpoint=endpoint)
    assert "agent agent@v1: invalid settings: agents.agent.settings.endpoint:" in str(info.value)
    assert problem in str(info.value)


def test_a_bad_url_from_the_environment_does_not_show_its_value(monkeypatch):
    monkeypatch.setenv("RCA_AGENT_URL", "ftp://svc:tok-51f0e2@agents.example.com/rca")
    with pytest.raises(ConfigError, match="scheme ftp:// is not supported") as info:
        runtime("http", endpoint="${RCA_AGENT_URL}")
    assert "tok-51f0e2" not in str(info.value)


def test_proxy_urls_are_checked_too():
    with pytest.raises(ConfigError, match=r"agents\.agent\.settings\.proxy: .*scheme ftp:// is not supported"):
        runtime("http", endpoint="http://127.0.0.1:9/rca", proxy="ftp://proxy.example.com:21")


CONFIG = """
from agent_health import define_config

config = define_config(
    default_agent="rca@v1",
    agents=[{"key": "rca", "connector": "http", "settings": {"endpoint": "ftp://agents.example.com/rca"},
             "versions": {"v1": {}}}],
)
"""


def test_the_cli_refuses_a_bad_endpoint_before_any_test_runs(tmp_path):
    (tmp_path / "agent_health_config.py").write_text(CONFIG)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "smoke.eval.py").write_text(
        'from agent_health import test\n\n@test("smoke", prompt="hi")\nasync def smoke(agent):\n    await agent.run()\n'
    )
    p = cli_in_process("run", "evals", cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "agents.rca.settings.endpoint" in p.stderr and "scheme ftp:// is not supported" in p.stderr
    assert "Traceback" not in p.stderr
    assert not (tmp_path / ".agent_health" / "results").exists()  # nothing ran

    p = cli_in_process("agents", "--check", "--json", cwd=tmp_path)
    assert p.returncode == 2
    (row,) = [r for r in json.loads(p.stdout) if r["ref"] == "rca@v1"]
    assert "agents.rca.settings.endpoint" in row["status"] and "scheme ftp:// is not supported" in row["status"]


# -- an empty answer is the agent's failure, not a failed test ------------------------------------
@pytest.mark.parametrize(
    "connector, path, reason",
    [
        ("http", "/no-content", "no answer: HTTP 204 with an empty body"),
        ("http", "/empty-200", "no answer: HTTP 200 with an empty body"),
        ("http", "/output-null", """no answer: HTTP 200 with no output in the body, which starts '{"output": null}'"""),
        ("http", "/output-blank", "no answer: HTTP 200 with no output in the body"),
        ("agui", "/agui-finished-first", "no answer: RUN_FINISHED came before any message, tool call or result"),
    ],
)
def test_an_endpoint_giving_no_answer_is_errored_with_the_reason(agent, connector, path, reason):
    message = invoke_error(runtime(connector, endpoint=agent.url + path, retry={"max_retries": 0}))
    assert f"({agent.url}{path})" in message and reason in message


def no_answer(prompt: str):
    return {
        "none": None,
        "blank": "",
        "null output": {"output": None},
        "the prompt echoed": {"trajectory": [{"kind": "message", "role": "user", "content": "the prompt echoed"}]},
    }[prompt]


@pytest.mark.parametrize(
    "prompt, reason",
    [
        ("none", "no answer: the function returned None"),
        ("blank", "no answer: the function returned str ''"),
        ("null output", "no answer: the function returned dict {'output': None}"),
        # the user's message the trajectory opens with is not the agent's answer
        ("the prompt echoed", "no answer: the function returned dict {'trajectory': [{'kind': 'message'"),
    ],
)
def test_a_python_agent_returning_nothing_is_errored_with_the_reason(prompt, reason):
    assert reason in invoke_error(runtime("python", function=no_answer), prompt=prompt)


def test_a_subprocess_agent_printing_nothing_is_errored_with_the_reason():
    import sys

    message = invoke_error(runtime("subprocess", command=[sys.executable, "-c", "print()"]))
    assert "no answer: it exited with status 0 and printed nothing" in message


EMPTY_EVALS = """
from agent_health import expect, test

@test("answers", prompt="Why is the payment service failing?")
async def answers(agent):
    result = await agent.run()
    expect(result.output).to_contain("database")
"""


@pytest.mark.parametrize("path", ["/no-content", "/output-null", "/agui-finished-first"])
def test_a_run_whose_agent_gives_no_answer_ends_errored_not_failed(agent, tmp_path, path):
    from agent_health import define_config, load_tests, run_tests

    (tmp_path / "empty.eval.py").write_text(EMPTY_EVALS)
    connector = "agui" if "agui" in path else "http"
    config = define_config(
        root=str(tmp_path),
        state_dir="state",
        agents=[
            {
                "key": "quiet",
                "connector": connector,
                "settings": {"endpoint": agent.url + path, "retry": {"max_retries": 0}},
                "versions": {"v1": {}},
            }
        ],
    )
    (result,) = run_tests(load_tests([tmp_path / "empty.eval.py"]).tests, config, "quiet@v1")
    assert result.status == "errored" and "no answer" in (result.error or ""), (result.status, result.error)
