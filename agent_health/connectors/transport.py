"""The HTTP client of the http and agui connectors: httpx's API on a maintained connection pool.

- `pool: "aiohttp"` (the default): httpx over httpx-aiohttp's `AiohttpTransport`, aiohttp's
  keep-alive HTTP/1.1 pool. At 64 concurrent agent runs it keeps within a few percent of the ideal
  wall time (see benchmarks/connectors_http.py), where httpx's own pool spends more CPU per request
  than the requests themselves.
- `pool: "httpx"`: httpx's own pool (httpcore), the one that speaks HTTP/2 (`http2: true`; it is
  chosen by default when http2 is on).

Either way the connectors see httpx requests, responses and exception types. Proxies come from the
`proxy` setting, else from the standard environment variables (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY,
NO_PROXY), for both pools.
"""

from __future__ import annotations

import ssl
from typing import Any, Literal

import httpx
from httpx_aiohttp import HttpxAiohttpClient  # imported with the connector, not inside a run's timeout

Pool = Literal["aiohttp", "httpx"]


def build_client(
    *,
    pool: Pool = "aiohttp",
    max_connections: int = 100,
    timeout_s: float = 60.0,
    connect_timeout_s: float = 10.0,
    verify: ssl.SSLContext | bool = True,
    http2: bool = False,
    proxy: str | None = None,
    base_url: str = "",
    headers: dict[str, str] | None = None,
) -> httpx.AsyncClient:
    """An httpx client on the chosen pool: at most `max_connections` open, kept alive (the judge's
    OpenAI-compatible client uses it too, with `base_url` and `headers`)."""
    if http2 and pool != "httpx":
        raise ValueError("http2 needs the httpx pool (aiohttp speaks HTTP/1.1 only)")
    common: dict[str, Any] = {
        "timeout": httpx.Timeout(timeout_s, connect=connect_timeout_s),
        "verify": verify,
        "proxy": proxy,
        "follow_redirects": True,
        "base_url": base_url,
        "headers": headers,
    }
    if pool == "httpx":
        # httpcore re-checks every idle connection on every request event: keeping as many idle as
        # may be open (100) made it 1.5-5x slower at concurrency 64 than its default of 20
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=min(20, max_connections))
        return httpx.AsyncClient(limits=limits, http2=http2, **common)
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    return HttpxAiohttpClient(limits=limits, event_hooks={"request": [_for_aiohttp]}, **common)


async def _for_aiohttp(request: httpx.Request) -> None:
    """What httpx hands the aiohttp transport, made right for it (run for every request,
    redirected ones included).

    - httpx has turned `user:password@` in the URL into an Authorization header by now; aiohttp
      refuses a request that carries both, so the URL keeps only the header's copy.
    - A redirected request keeps its body as an unread stream, which the transport sends as a
      chunked body: a GET redirected again went out as `Transfer-Encoding: chunked` + `0`, which
      servers read as a second, malformed request (a 400 page read as a bad status line, or a hang).
      Reading the in-memory body first lets the transport send it as plain bytes, or none."""
    if request.url.userinfo:
        request.url = request.url.copy_with(userinfo=b"")
    if isinstance(request.stream, httpx.ByteStream):
        await request.aread()
