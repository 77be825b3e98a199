"""An ASGI agent served by hypercorn over TLS for the HTTP/2 tests: it answers with the HTTP
version the request arrived on, so the test sees what was negotiated."""

from __future__ import annotations

import json
from typing import Any


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    prompt = json.loads(body or b"{}").get("prompt", "")
    answer = json.dumps({"response": f"{prompt} over HTTP/{scope['http_version']}"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": answer})
