"""Helpers for the judge tests: real HTTP servers on 127.0.0.1 playing scripted answers, and an
in-memory trace source implementing RunTraceTools."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from agent_health.model import RunResult, Step, Usage
from agent_health.model.judge import JudgeRequest
from agent_health.traces.tools import RunTraceTools
from tests.support import LocalHTTPServer, QuietHandler

Reply = tuple[int, dict[str, str], Any]  # status, headers, JSON body (or str)
NONCE = "{{nonce}}"  # in a scripted reply: replaced by the nonce of the prompt it answers, as a judge echoes it
_FENCE_NONCE = re.compile(r"^<<<UNTRUSTED [A-Z_]+ ([0-9a-f]{16})>>>$", re.M)
_FORMAT_NONCE = re.compile(r'"nonce": "([0-9a-f]{16})"')


def strings(value: Any) -> list[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def nonce_of(rec: Recorded) -> str | None:
    """The nonce of the judge prompt in a request: from its fence lines (agent text cannot forge
    one: it is defanged), else from its answer format."""
    texts = strings(rec.json)
    for pattern in (_FENCE_NONCE, _FORMAT_NONCE):
        for text in texts:
            if m := pattern.search(text):
                return m.group(1)
    return None


class Recorded:
    """One request the server received."""

    def __init__(self, method: str, path: str, headers: dict[str, str], raw: bytes):
        self.method, self.path, self.headers, self.raw = method, path, headers, raw
        try:
            self.json: Any = json.loads(raw) if raw else None
        except ValueError:
            self.json = None


class ScriptedServer:
    """A real HTTP server: replies from `script` in order, then from `default(request)`."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.script: deque[Reply | Callable[[Recorded], Reply]] = deque()
        self.default: Callable[[Recorded], Reply] = lambda r: (500, {}, {"error": "no scripted reply"})
        self.delay_s = 0.0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # readiness probe
                self._send(200, {}, {"ok": True})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                rec = Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, raw)
                with server._lock:
                    server.requests.append(rec)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    step = server.script.popleft() if server.script else server.default
                try:
                    if server.delay_s:
                        time.sleep(server.delay_s)
                    status, headers, body = step(rec) if callable(step) else step
                finally:
                    with server._lock:
                        server.in_flight -= 1
                if NONCE in (text := body if isinstance(body, str) else json.dumps(body)):
                    body = text.replace(NONCE, nonce_of(rec) or "no-nonce-in-prompt")
                self._send(status, headers, body)

            def _send(self, status: int, headers: dict[str, str], body: Any) -> None:
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = LocalHTTPServer(Handler).start()
        self.url = self.httpd.url

    def posts(self) -> list[Recorded]:
        return [r for r in self.requests if r.method == "POST"]

    def close(self) -> None:
        self.httpd.close()


def chat(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    usage: tuple[int, int] = (100, 20),
    model: str = "judge-model",
    finish_reason: str | None = None,
) -> Reply:
    """An OpenAI chat-completions reply (`finish_reason` "stop", or "tool_calls" with tool calls)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("args", {}))},
            }
            for i, c in enumerate(tool_calls)
        ]
    return (
        200,
        {},
        {
            "id": "cmpl-1",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
                }
            ],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": usage[0] + usage[1]},
        },
    )


def verdict_json(
    passed: bool = True, score: float = 0.9, reasoning: str = "the output names the database", nonce: str | None = NONCE
) -> str:
    """A verdict as a judge writes it; it echoes the prompt's nonce unless `nonce` is None."""
    verdict = {"pass": passed, "score": score, "reasoning": reasoning}
    return json.dumps(verdict if nonce is None else {"nonce": nonce, **verdict})


class MemoryTraceTools(RunTraceTools):
    """An in-memory trace source bound to one run."""

    def __init__(self, run_id: str, spans: list[dict[str, Any]], logs: list[dict[str, Any]] | None = None):
        self.run_id = run_id
        self.spans = spans
        self.logs = logs or []
        self.calls: list[str] = []

    async def get_spans(self) -> list[dict[str, Any]]:
        self.calls.append("get_spans")
        return list(self.spans)

    async def get_logs(self) -> list[dict[str, Any]]:
        self.calls.append("get_logs")
        return list(self.logs)

    async def metrics(self) -> dict[str, Any]:
        self.calls.append("metrics")
        return {"spans": len(self.spans), "duration_ms": sum(s.get("duration_ms", 0) for s in self.spans)}

    async def query(self, dsl: dict[str, Any]) -> list[dict[str, Any]]:
        self.calls.append("query")
        if "script" in json.dumps(dsl):
            raise PermissionError("scripts are not allowed in trace queries")
        wanted = ((dsl.get("query") or {}).get("match") or {}).get("name")
        return [s for s in self.spans if wanted is None or s.get("name") == wanted]


def make_run(
    output: str = "The payment service cannot reach its database db-primary:5432 (connection refused).",
    run_id: str = "run-1",
    tool_result: str = "ERROR Connection refused to db-primary:5432",
) -> RunResult:
    return RunResult(
        output=output,
        run_id=run_id,
        agent="demo@v2",
        prompt="Diagnose why the payment service is failing.",
        trajectory=(
            Step(kind="thinking", content="I should look at the logs.", started_ms=0, duration_ms=5),
            Step(kind="tool_call", tool="search_logs", args={"service": "payment"}, call_id=f"{run_id}-c1"),
            Step(kind="tool_result", tool="search_logs", content=tool_result, call_id=f"{run_id}-c1"),
            Step(kind="message", content=output),
        ),
        usage=Usage.of(500, 80, model="demo-sre-large"),
    )


def make_request(
    criteria: str = "identifies that the payment service cannot reach its database", **kw: Any
) -> JudgeRequest:
    run = kw.pop("run", None) or make_run()
    return JudgeRequest(criteria=criteria, run=run, output=run.output, test_id=kw.pop("test_id", "suite::t"), **kw)


def openai_settings(server: ScriptedServer, **kw: Any) -> dict[str, Any]:
    """JudgeSettings kwargs pointing the openai provider at `server` (fast backoff)."""
    base = {
        "provider": "openai",
        "model": "judge-model",
        "settings": {"base_url": server.url + "/v1"},
        "backoff_s": 0.01,
        "backoff_max_s": 2.0,
    }
    base.update(kw)
    return base


def fenced(text: str, label: str) -> str:
    """The body of the `label` fence in a prompt."""
    m = re.search(
        rf"^<<<UNTRUSTED {label} ([0-9a-f]{{16}})>>>\n(.*?)\n<<<END UNTRUSTED {label} \1>>>$", text, re.M | re.S
    )
    assert m, f"no {label} fence in the prompt"
    return m.group(2)
