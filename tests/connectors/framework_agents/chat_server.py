"""A real OpenAI-compatible chat completions server on 127.0.0.1 that plays the SRE model: with no
tool result yet it calls search_logs, then it answers with that result and the last line of the
system or developer message (the test's context), reporting its usage like OpenAI does."""

from __future__ import annotations

import json
from typing import Any

from tests.support import LocalHTTPServer, QuietHandler

MODEL = "gpt-4o-mini"


def completion(body: dict[str, Any]) -> dict[str, Any]:
    messages = body.get("messages") or []
    results = [m for m in messages if m.get("role") == "tool"]
    context = [m for m in messages if m.get("role") in ("system", "developer")]
    if not results:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "reasoning_content": "Start from the payment service's logs.",
            "tool_calls": [
                {
                    "id": "call_logs_1",
                    "type": "function",
                    "function": {"name": "search_logs", "arguments": json.dumps({"service": "payment"})},
                }
            ],
        }
        usage = (50, 12)
    else:
        last_line = str(context[-1]["content"]).strip().splitlines()[-1] if context else "(none)"
        message = {"role": "assistant", "content": f"{results[-1]['content']} The test's context says: {last_line}"}
        usage = (70, 25)
    return {
        "id": "chatcmpl-sre",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body.get("model") or MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if not results else "stop"}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


class Handler(QuietHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        if not self.path.endswith("/chat/completions") or body.get("stream"):
            data, status = json.dumps({"error": {"message": f"not served: {self.path}"}}).encode(), 404
        else:
            data, status = json.dumps(completion(body)).encode(), 200
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def start() -> LocalHTTPServer:
    return LocalHTTPServer(Handler).start()
