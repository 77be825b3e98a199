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

import asyncio
import ssl
from typing import Any, Literal

import aiohttp
import httpx
from httpx_aiohttp import HttpxAiohttpClient  # imported with the connector, not inside a run's timeout
from httpx_aiohttp.transport import AiohttpResponseStream, AiohttpTransport, map_aiohttp_exceptions

from agent_health.connectors import eager_body

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
        return _HttpxClient(limits=limits, http2=http2, **common)
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    return _AiohttpClient(limits=limits, event_hooks={"request": [_for_aiohttp]}, **common)


class _AiohttpTransport(AiohttpTransport):
    """httpx-aiohttp's transport minus two per-request costs (benchmarks/connectors_http.py): it
    handed aiohttp the httpx `Headers`, which aiohttp reads key by key, each lookup a scan of every
    header; and it built a new `ClientTimeout` for every request. The request sent is the same."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._timeouts: dict[tuple[float | None, float | None, float | None], aiohttp.ClientTimeout] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not isinstance(self.client, aiohttp.ClientSession):
            self.client = self.get_client()
            eager_body.install(asyncio.get_running_loop())
        timeout = request.extensions.get("timeout", {})
        key = (timeout.get("connect"), timeout.get("read"), timeout.get("pool"))
        client_timeout = self._timeouts.get(key)
        if client_timeout is None:
            client_timeout = self._timeouts[key] = aiohttp.ClientTimeout(
                sock_connect=key[0], sock_read=key[1], connect=key[2]
            )
        with map_aiohttp_exceptions():
            data: Any
            try:
                data = request.content or None
            except httpx.RequestNotRead:
                data = request.stream
                request.headers.pop("transfer-encoding", None)  # aiohttp frames the body itself
            proxy = self.proxy
            response = await self.client.request(
                method=request.method,
                url=str(request.url),
                headers=list(request.headers.items()),  # as httpx joins repeated headers
                data=data,
                allow_redirects=False,  # httpx follows them (and runs the request hooks on each)
                auto_decompress=False,  # httpx decodes the body
                compress=False,
                timeout=client_timeout,
                server_hostname=request.extensions.get("sni_hostname"),
                proxy=str(proxy.url) if proxy else None,
                proxy_auth=aiohttp.BasicAuth(*proxy.auth) if proxy and proxy.auth else None,
                proxy_headers=proxy.headers if proxy else None,
            ).__aenter__()
        extensions = {"http_version": b"HTTP/1.1"}
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode()
        return httpx.Response(
            status_code=response.status,
            headers=response.raw_headers,
            stream=AiohttpResponseStream(response),
            request=request,
            extensions=extensions,
        )


class _Cookies(httpx.Cookies):
    """The client's cookie jar. httpx hands every response to the jar, which first copies the
    request and the response into urllib's types (parsing the URL and every header again); the
    jar reads only `Set-Cookie` headers, so a response without one is skipped."""

    def extract_cookies(self, response: httpx.Response) -> None:
        headers = response.headers
        if "set-cookie" in headers or "set-cookie2" in headers:
            super().extract_cookies(response)


class _SkipsCookielessResponses(httpx.AsyncClient):
    """An httpx client whose `cookies` is a `_Cookies`."""

    def __init__(self, *, cookies: Any = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.cookies = cookies

    @property
    def cookies(self) -> httpx.Cookies:
        return self._skipping_cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        self._skipping_cookies = _Cookies(cookies)


class _HttpxClient(_SkipsCookielessResponses):
    """httpx's own client and pool."""


class _AiohttpClient(_SkipsCookielessResponses, HttpxAiohttpClient):
    """HttpxAiohttpClient on `_AiohttpTransport`, direct and through a proxy."""

    def _init_transport(  # type: ignore[override]  # httpx passes these by keyword
        self, *, transport: httpx.AsyncBaseTransport | None = None, **kwargs: Any
    ) -> httpx.AsyncBaseTransport:
        return transport if transport is not None else _AiohttpTransport(**kwargs)

    def _init_proxy_transport(self, proxy: httpx.Proxy, **kwargs: Any) -> httpx.AsyncBaseTransport:  # type: ignore[override]
        return _AiohttpTransport(proxy=proxy, **kwargs)


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


class RequestBuilder:
    """Builds what `client.build_request(method, url, headers=..., content=...)` builds, for less
    CPU: that call re-parses the URL and merges the client's default headers into the request's
    through httpx `Headers` on every call. Here the client's defaults are read once and the last
    URL's parse is reused. When the client
    holds cookies or query parameters (which a connector's client never sets, but an agent may set
    cookies), httpx builds the request itself, so they are sent as before."""

    def __init__(self, client: httpx.AsyncClient):
        self.client = client
        self._defaults = {k.lower(): (k, v) for k, v in client.headers.multi_items()}
        self._timeout = client.timeout.as_dict()
        self._url: tuple[str, httpx.URL] | None = None
        self._base_url = bool(str(client.base_url))

    def build(self, method: str, url: str, headers: dict[str, str], content: bytes) -> httpx.Request:
        client = self.client
        if self._base_url or client.cookies or client.params:
            return client.build_request(method, url, headers=headers, content=content)
        if self._url is None or self._url[0] != url:
            self._url = (url, httpx.URL(url))
        parsed = self._url[1]
        merged = dict(self._defaults)
        for k, v in headers.items():  # the request's own headers win, whatever their case
            merged[k.lower()] = (k, v)
        # The headers httpx adds for `content=` bytes, in its order: Host first, the request's
        # own, then Content-Length (or `Content-Length: 0` first, for an empty POST, PUT or
        # PATCH). Handing httpx the body as a stream skips its generic encoding of `content`,
        # which re-read every header several times (about 25 us a request).
        listed = list(merged.values())
        if content and "content-length" not in merged:
            listed.append(("Content-Length", str(len(content))))
        auto: list[tuple[str | bytes, str | bytes]] = []
        if "host" not in merged and parsed.host:
            auto.append((b"Host", parsed.netloc))
        framed = "content-length" in merged or "transfer-encoding" in merged or bool(content)
        if not framed and method.upper() in ("POST", "PUT", "PATCH"):
            auto.append((b"Content-Length", b"0"))
        request = httpx.Request(
            method,
            parsed,
            headers=auto + listed,  # type: ignore[arg-type]  # httpx takes str and bytes pairs alike
            stream=httpx.ByteStream(content),
            extensions={"timeout": self._timeout},
        )
        request.read()  # as httpx does for in-memory content: `request.content` is the body
        return request
