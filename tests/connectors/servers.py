"""Real agents on 127.0.0.1 for the connector tests: a REST agent and an AG-UI agent in one
threaded stdlib HTTP server, each route one behaviour (shapes, faults, SigV4 verification)."""

from __future__ import annotations

import datetime
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support import LocalHTTPServer, QuietHandler

SIGV4_KEY_ID = "AKIDEXAMPLETESTKEY"
SIGV4_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SIGV4_REGION = "eu-west-1"
SIGV4_SERVICE = "execute-api"


class Handler(QuietHandler):  # HTTP/1.1 keep-alive, like a real agent server
    server: AgentServer

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = urlsplit(self.path).path
        self.server.requests.append(
            {
                "path": path,
                "headers": dict(self.headers.items()),
                "body": body,
                "raw": raw,
                "client_port": self.client_address[1],
                "at": time.monotonic(),  # when the whole request had arrived
            }
        )
        route = self.server.routes.get(path)
        if route is None:
            return self.send_json({"error": f"no route {path}"}, 404)
        route(self, body)

    def send_bytes(
        self, data: bytes, status: int = 200, ctype: str = "application/json", headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, doc: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.send_bytes(json.dumps(doc).encode(), status, headers=headers)

    def start_chunked(self, ctype: str = "text/event-stream") -> None:
        self.send_response(200)
        self.send_header("content-type", ctype)
        self.send_header("transfer-encoding", "chunked")
        self.send_header("cache-control", "no-cache")
        self.end_headers()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class AgentServer(LocalHTTPServer):
    def __init__(self) -> None:
        super().__init__(Handler)
        self.routes: dict[str, Callable[[Handler, Any], None]] = {}
        self.requests: list[dict[str, Any]] = []
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def route(self, path: str) -> Callable[[Callable[[Handler, Any], None]], Callable[[Handler, Any], None]]:
        def deco(fn: Callable[[Handler, Any], None]) -> Callable[[Handler, Any], None]:
            self.routes[path] = fn
            return fn

        return deco

    def bump(self, key: str) -> int:
        with self.lock:
            self.counts[key] += 1
            return self.counts[key]


# -- REST routes ------------------------------------------------------------------
def install_rest(srv: AgentServer) -> None:
    @srv.route("/chat")
    def chat(h: Handler, body: Any) -> None:
        prompt = (body or {}).get("prompt", "")
        if prompt == "please fail":
            return h.send_json({"error": "internal"}, 500)
        h.send_json(
            {
                "response": f"answer to: {prompt}",
                "thinking": "look at the logs first",
                "toolCalls": [{"id": "c1", "name": "search_logs", "args": {"q": prompt}, "result": "ERROR db refused"}],
                "usage": {"input_tokens": 12, "output_tokens": 7},
                "model": "rest-model-1",
            }
        )

    @srv.route("/echo")
    def echo(h: Handler, body: Any) -> None:
        h.send_json({"answer": "echoed", "received": {"headers": dict(h.headers.items()), "body": body}})

    @srv.route("/set-cookie")  # an agent keeping a session in a cookie
    def set_cookie(h: Handler, body: Any) -> None:
        h.send_json({"answer": "cookie set"}, headers={"set-cookie": "session=s1; Path=/"})

    @srv.route("/openai")
    def openai(h: Handler, body: Any) -> None:
        h.send_json(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": "gpt-test",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": "Checking the database.",
                            "tool_calls": [
                                {
                                    "id": "call_9",
                                    "type": "function",
                                    "function": {"name": "query_metrics", "arguments": '{"metric": "db_connections"}'},
                                }
                            ],
                        },
                    }
                ],
                "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39},
            }
        )

    @srv.route("/nested")
    def nested(h: Handler, body: Any) -> None:
        h.send_json({"data": {"result": {"text": "nested answer"}, "calls": [{"tool": "t", "input": {"a": 1}}]}})

    @srv.route("/text")
    def text(h: Handler, body: Any) -> None:
        h.send_bytes(b"plain text answer", ctype="text/plain; charset=utf-8")

    @srv.route("/500")
    def err500(h: Handler, body: Any) -> None:
        srv.bump("500")
        h.send_json({"error": "database exploded"}, 500)

    @srv.route("/429")
    def rate_limited(h: Handler, body: Any) -> None:
        if srv.bump("429:" + str((body or {}).get("run_id"))) == 1:
            return h.send_json({"error": "slow down"}, 429, headers={"retry-after": "1"})
        h.send_json({"response": "finally"})

    @srv.route("/slow")
    def slow(h: Handler, body: Any) -> None:
        time.sleep(3)
        try:
            h.send_json({"response": "too late"})
        except OSError:
            pass

    @srv.route("/malformed")
    def malformed(h: Handler, body: Any) -> None:
        h.send_bytes(b'{"response": "half an obj')

    @srv.route("/big")
    def big(h: Handler, body: Any) -> None:
        h.send_bytes(json.dumps({"response": "x" * 200_000}).encode())

    @srv.route("/big-chunked")
    def big_chunked(h: Handler, body: Any) -> None:
        h.start_chunked("application/json")
        try:
            h.chunk(b'{"response": "')
            for _ in range(50):
                h.chunk(b"y" * 10_000)
            h.chunk(b'"}')
            h.end_chunked()
        except OSError:
            pass

    @srv.route("/latin1")
    def latin1(h: Handler, body: Any) -> None:
        h.send_bytes('{"response": "caf\u00e9 cr\u00e8me"}'.encode("latin-1"))

    @srv.route("/deny")
    def deny(h: Handler, body: Any) -> None:  # a careless agent that echoes the credential
        h.send_json({"error": f"bad credential {h.headers.get('authorization')}"}, 401)

    @srv.route("/count")
    def count(h: Handler, body: Any) -> None:
        n = srv.bump("count:" + (body or {}).get("prompt", ""))
        h.send_json(
            {
                "response": f"call {n} for {(body or {}).get('prompt')}",
                "toolCalls": [{"name": "lookup", "args": {"n": n}}],
            }
        )

    @srv.route("/drop-after")
    def drop_after(h: Handler, body: Any) -> None:  # answers as keep-alive, then drops the connection
        h.send_json({"response": "dropped after"})
        h.close_connection = True

    @srv.route("/sigv4")
    def sigv4(h: Handler, body: Any) -> None:
        ok, why = verify_sigv4(h, srv.requests[-1]["raw"])
        if not ok:
            return h.send_json({"message": f"signature mismatch: {why}"}, 403)
        h.send_json({"response": "signed ok"})


def verify_sigv4(h: Handler, raw: bytes) -> tuple[bool, str]:
    """Recompute the SigV4 signature with botocore, over exactly the headers the client signed."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = h.headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return False, "no SigV4 authorization header"
    parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 ") :].split(","))
    signed = parts["SignedHeaders"].split(";")
    key_id, _date, region, service, _ = parts["Credential"].split("/")
    if (key_id, region, service) != (SIGV4_KEY_ID, SIGV4_REGION, SIGV4_SERVICE):
        return False, f"unexpected credential scope {parts['Credential']}"
    stamp = h.headers.get("x-amz-date", "")
    when = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
    if abs((datetime.datetime.now(datetime.UTC) - when).total_seconds()) > 300:
        return False, "stale x-amz-date"
    url = f"http://{h.headers['host']}{h.path}"
    req = AWSRequest(
        method=h.command,
        url=url,
        data=raw,
        headers={k: v for k, v in h.headers.items() if k.lower() in signed and k.lower() != "host"},
    )
    req.context["timestamp"] = stamp
    signer = SigV4Auth(Credentials(SIGV4_KEY_ID, SIGV4_SECRET), SIGV4_SERVICE, SIGV4_REGION)
    canonical = signer.canonical_request(req)
    expected = signer.signature(signer.string_to_sign(req, canonical), req)
    if expected != parts["Signature"]:
        return False, "signature does not match"
    return True, ""


# -- AG-UI routes ---------------------------------------------------------------------
def install_agui(srv: AgentServer) -> None:
    from ag_ui.core import (
        CustomEvent,
        ReasoningEndEvent,
        ReasoningMessageContentEvent,
        ReasoningMessageEndEvent,
        ReasoningMessageStartEvent,
        ReasoningStartEvent,
        RunErrorEvent,
        RunFinishedEvent,
        RunStartedEvent,
        StateSnapshotEvent,
        StepFinishedEvent,
        StepStartedEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
        ToolCallArgsEvent,
        ToolCallEndEvent,
        ToolCallResultEvent,
        ToolCallStartEvent,
    )
    from ag_ui.encoder import EventEncoder

    enc = EventEncoder()

    def stream(h: Handler, events: list[Any], finish: bool = True, cut: bool = False) -> None:
        h.start_chunked()
        for ev in events:
            h.chunk(enc.encode(ev).encode() if not isinstance(ev, bytes) else ev)
        if cut:  # drop the connection mid-stream: no terminating chunk
            h.close_connection = True
            h.wfile.flush()
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        if finish:
            h.end_chunked()

    @srv.route("/agui")
    def agui(h: Handler, body: Any) -> None:
        tid, rid = body["threadId"], body["runId"]
        question = body["messages"][-1]["content"]
        stream(
            h,
            [
                RunStartedEvent(thread_id=tid, run_id=rid),
                StepStartedEvent(step_name="investigate"),
                ReasoningStartEvent(message_id="r1"),
                ReasoningMessageStartEvent(message_id="r1", role="reasoning"),
                ReasoningMessageContentEvent(message_id="r1", delta="I should check "),
                ReasoningMessageContentEvent(message_id="r1", delta="the logs."),
                ReasoningMessageEndEvent(message_id="r1"),
                ReasoningEndEvent(message_id="r1"),
                ToolCallStartEvent(tool_call_id="tc1", tool_call_name="search_logs", parent_message_id="m0"),
                ToolCallArgsEvent(tool_call_id="tc1", delta='{"service": '),
                ToolCallArgsEvent(tool_call_id="tc1", delta='"payment"}'),
                ToolCallEndEvent(tool_call_id="tc1"),
                ToolCallResultEvent(message_id="m_tr", tool_call_id="tc1", content="Connection refused to db-primary"),
                StateSnapshotEvent(snapshot={"phase": "answering", "context_items": len(body["context"])}),
                StepFinishedEvent(step_name="investigate"),
                TextMessageStartEvent(message_id="m1", role="assistant"),
                TextMessageContentEvent(message_id="m1", delta="The payment service "),
                TextMessageContentEvent(message_id="m1", delta=f"cannot reach its DB ({question})."),
                TextMessageEndEvent(message_id="m1"),
                CustomEvent(name="usage", value={"input_tokens": 100, "output_tokens": 20}),
                b'data: {"type": "VENDOR_SPECIAL", "x": 1}\n\n',
                RunFinishedEvent(thread_id=tid, run_id=rid),
            ],
        )

    @srv.route("/agui-legacy")  # pre-1.0 THINKING_* names, as older agents still send them
    def legacy(h: Handler, body: Any) -> None:
        tid, rid = body["threadId"], body["runId"]
        raw = [
            {"type": "RUN_STARTED", "threadId": tid, "runId": rid},
            {"type": "THINKING_START"},
            {"type": "THINKING_TEXT_MESSAGE_START"},
            {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "hmm"},
            {"type": "THINKING_TEXT_MESSAGE_END"},
            {"type": "THINKING_END"},
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "assistant", "delta": "chunked answer"},
            {"type": "RUN_FINISHED", "threadId": tid, "runId": rid},
        ]
        stream(h, [f"data: {json.dumps(e)}\n\n".encode() for e in raw])

    @srv.route("/agui-error")
    def agui_error(h: Handler, body: Any) -> None:
        stream(
            h,
            [
                RunStartedEvent(thread_id=body["threadId"], run_id=body["runId"]),
                TextMessageStartEvent(message_id="m1", role="assistant"),
                RunErrorEvent(message="model quota exceeded", code="QUOTA"),
            ],
        )

    @srv.route("/agui-cut")
    def agui_cut(h: Handler, body: Any) -> None:
        stream(
            h,
            [
                RunStartedEvent(thread_id=body["threadId"], run_id=body["runId"]),
                TextMessageStartEvent(message_id="m1", role="assistant"),
                TextMessageContentEvent(message_id="m1", delta="The root cause is"),
            ],
            cut=True,
        )

    @srv.route("/agui-early-end")
    def agui_early(h: Handler, body: Any) -> None:
        stream(
            h,
            [
                RunStartedEvent(thread_id=body["threadId"], run_id=body["runId"]),
                TextMessageStartEvent(message_id="m1", role="assistant"),
                TextMessageContentEvent(message_id="m1", delta="The root cause is"),
            ],
        )

    @srv.route("/agui-503-once")
    def agui_503(h: Handler, body: Any) -> None:
        if srv.bump("agui503:" + body["runId"]) == 1:
            return h.send_json({"error": "warming up"}, 503)
        tid, rid = body["threadId"], body["runId"]
        stream(
            h,
            [
                RunStartedEvent(thread_id=tid, run_id=rid),
                TextMessageStartEvent(message_id="m1", role="assistant"),
                TextMessageContentEvent(message_id="m1", delta="ok after retry"),
                TextMessageEndEvent(message_id="m1"),
                RunFinishedEvent(thread_id=tid, run_id=rid),
            ],
        )

    @srv.route("/agui-latin1")
    def agui_latin1(h: Handler, body: Any) -> None:
        stream(
            h,
            [
                RunStartedEvent(thread_id=body["threadId"], run_id=body["runId"]),
                'data: {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "caf\u00e9"}\n\n'.encode("latin-1"),
            ],
        )


# -- helpers for tests --------------------------------------------------------------
def runtime(connector: str, key: str = "agent", version: str = "v1", **settings: Any):
    """An AgentRuntime for one agent version built the way the session builds it."""
    from agent_health.config.agents import AgentSpec
    from agent_health.connectors.base import AgentRuntime

    spec = AgentSpec(key=key, connector=connector, settings=settings, versions={version: {}})
    return AgentRuntime(spec.resolve(version))


def invoke(rt: Any, prompt: str = "hello", **request: Any):
    """Run one request through the runtime (assigning run id and trace context) and close it."""
    import asyncio

    from agent_health.model.agent import AgentRequest

    async def go():
        try:
            return await rt.invoke(AgentRequest(prompt=prompt, **request))
        finally:
            await rt.aclose()

    return asyncio.run(go())


def invoke_error(rt: Any, prompt: str = "hello", **request: Any) -> str:
    """The AgentError message of a run that must fail."""
    from agent_health.errors import AgentError

    with pytest.raises(AgentError) as info:
        invoke(rt, prompt, **request)
    return str(info.value)
