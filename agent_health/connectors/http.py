"""The `http` connector: one POST per run to a REST agent, over pooled keep-alive connections.

Settings (see `HttpSettings`): `endpoint`, `headers`, `auth`, `body` (extra fields) or
`body_template`, `response_paths`, `request_timeout_s`, `timeout_s` (per run), `retry`,
`max_response_bytes`, hooks. The default body is `{prompt, context, run_id}` plus `model`,
`provisioned`, `files` and `env` (the test's `agent.run(env=...)`) when set, plus `body`; a turn
of a conversation adds `messages` (the conversation so far), `conversation_id` and the
`session_id` the agent gave (see `HttpBase.session_of`). Every request carries `traceparent` and
`x-agent-health-run-id`.
"""

from __future__ import annotations

import asyncio
import errno
import json
import re
import socket
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp
import httpx
from pydantic import Field, ValidationInfo, field_validator

from agent_health.config.secrets import collect_sensitive, display_value, redact_headers, register_log_secrets
from agent_health.connectors.auth import Authenticator, AuthSettings
from agent_health.connectors.common import ConnectorSettings, RealConnector
from agent_health.connectors.parsing import (
    OUTPUT_KEYS,
    STEP_KEYS,
    THINKING_KEYS,
    TOOL_KEYS,
    ParseError,
    artifacts_of,
    get_path,
    parse_body,
)
from agent_health.connectors.retry import RetryPolicy, parse_retry_after
from agent_health.connectors.transport import Pool, RequestBuilder, build_client
from agent_health.errors import AgentError
from agent_health.model import RunResult
from agent_health.model.agent import AgentRequest
from agent_health.model.limits import Bytes, Connections, Timeout

RUN_ID_HEADER = "x-agent-health-run-id"
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][\w.]*)\s*\}\}")


class HttpSettings(ConnectorSettings):
    """Settings of the http (and agui) connector."""

    endpoint: str = Field(description="URL of the agent.")
    method: Literal["POST", "PUT", "PATCH"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict, description="Extra request headers.")
    auth: AuthSettings = Field(default_factory=AuthSettings, description="none, bearer, api_key, basic or sigv4.")
    body: dict[str, Any] = Field(default_factory=dict, description="Extra fields merged into the default body.")
    body_template: Any = Field(
        None,
        description="JSON template with {{prompt}}, {{context}}, {{run_id}}, "
        "{{messages}}, {{provisioned.NAME}}... (in a conversation also {{history}}, {{turn}}, "
        "{{conversation_id}}, {{session_id}}); or fn(request) -> body.",
    )
    response_paths: dict[str, str] = Field(
        default_factory=dict,
        description="Dotted paths of output, tool_calls, thinking, trajectory, usage (and session_id, the id "
        "a conversational agent gives its side of a conversation) in the response.",
    )
    request_timeout_s: Timeout = Field(60.0, description="Per-request timeout (idle timeout when streaming).")
    connect_timeout_s: Timeout = Field(10.0, description="Connection timeout.")
    retry: RetryPolicy = Field(default_factory=RetryPolicy, description="Retries of connection errors, 429, 5xx.")
    max_response_bytes: Bytes = Field(10 * 1024 * 1024, description="Larger responses are an error.")
    max_connections: Connections = Field(100, description="Pooled connections to the agent.")
    pool: Pool | None = Field(
        None,
        description="Connection pool (see connectors.transport): aiohttp (HTTP/1.1) or httpx (its own pool, "
        "needed for http2). Unset: httpx when http2 is on, else aiohttp.",
    )
    http2: bool = Field(False, description="Speak HTTP/2 when the agent offers it (TLS with ALPN); needs pool httpx.")
    proxy: str | None = Field(
        None,
        description="Proxy URL (http://[user:password@]host:port); unset: HTTP_PROXY / HTTPS_PROXY / ALL_PROXY "
        "/ NO_PROXY from the environment.",
    )
    verify_tls: bool = Field(True, description="Verify the agent's TLS certificate.")

    @field_validator("endpoint")
    @classmethod
    def _endpoint_is_http_url(cls, value: str) -> str:
        return check_http_url(value)

    @field_validator("proxy")
    @classmethod
    def _proxy_is_http_url(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value, schemes=("http", "https", "socks5"))

    @field_validator("http2")
    @classmethod
    def _pool_speaks_http2(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("pool") == "aiohttp":
            raise ValueError("needs pool 'httpx' (the aiohttp pool speaks HTTP/1.1 only)")
        return value

    @property
    def effective_pool(self) -> Pool:
        return self.pool or ("httpx" if self.http2 else "aiohttp")


def check_http_url(value: str, schemes: tuple[str, ...] = ("http", "https")) -> str:
    """`value` when it is an absolute URL with one of `schemes` and a host. The error names what is
    wrong, never the value itself (it may hold a resolved secret)."""
    try:
        parts = urlsplit(value.strip())
        parts.port  # noqa: B018 -- raises ValueError on a port that is not a number
    except ValueError as exc:
        raise ValueError(f"not a valid URL ({exc})") from None
    wanted = " or ".join(f"{s}://" for s in schemes)
    if not parts.scheme:
        raise ValueError(f"not a URL: expected {wanted}host[:port]/path")
    if parts.scheme.lower() not in schemes:
        raise ValueError(f"scheme {parts.scheme}:// is not supported; use {wanted}")
    if not parts.hostname:
        raise ValueError(f"the URL has no host; expected {parts.scheme}://host[:port]/path")
    return value.strip()


def describe_transport_error(exc: BaseException) -> str:
    """A short human reason for a transport error. httpx often says only 'All connection attempts
    failed', and the aiohttp pool's errors arrive mapped to a coarse httpx type: the cause chain
    says what really happened."""
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not seen for seen in chain):
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    if isinstance(exc, httpx.TooManyRedirects):
        url = exc.request.url
        return f"redirected too many times: a redirect loop? (the last redirect pointed to {url.scheme}://{url.netloc.decode()}{url.path})"
    for cause in chain:
        if isinstance(cause, aiohttp.http_exceptions.HttpProcessingError):  # aiohttp calls these "400"
            return f"the agent's response is not valid HTTP: {body_start(cause.message, 200)}"
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"TLS certificate not trusted: {cause.verify_message or cause}"
        if isinstance(cause, ssl.SSLError):
            return f"TLS error: {cause.reason or cause}"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, ConnectionResetError):
            return "connection reset by the agent"
        if isinstance(cause, BrokenPipeError) or getattr(cause, "errno", None) == errno.EPIPE:
            return "the agent closed the connection while the request was being sent (broken pipe)"
        if isinstance(cause, socket.gaierror):
            return f"cannot resolve the host ({cause.strerror or cause})"
        if isinstance(cause, aiohttp.ClientProxyConnectionError):
            return f"cannot connect to the proxy: {cause.os_error.strerror or cause.os_error}"
        if isinstance(cause, aiohttp.ClientHttpProxyError):
            return f"the proxy answered HTTP {cause.status}: {cause.message}"
        if isinstance(cause, aiohttp.ServerDisconnectedError):
            return "the agent closed the connection without a response"
        if isinstance(cause, aiohttp.ServerTimeoutError | TimeoutError):
            return "timed out"
    for cause in chain:
        # httpx-aiohttp maps every aiohttp connection error to httpx.ConnectTimeout: say what it was
        if isinstance(cause, aiohttp.ClientConnectionError):
            return f"connection error: {cause}"
    if isinstance(exc, httpx.ConnectTimeout):
        return "connection timed out"
    if isinstance(exc, httpx.ProxyError):
        return f"proxy error: {exc}"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"protocol error: {exc}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def fill_template(template: Any, values: dict[str, Any]) -> Any:
    """`{{name}}` alone keeps the value's type; inside a longer string it is formatted as text."""

    def lookup(name: str) -> Any:
        try:
            return get_path(values, name)
        except KeyError:
            raise AgentError(
                f"body_template: unknown placeholder {{{{{name}}}}}; known: " + ", ".join(sorted(values))
            ) from None

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            whole = _PLACEHOLDER.fullmatch(v.strip())
            if whole:
                return lookup(whole.group(1))
            return _PLACEHOLDER.sub(
                lambda m: (lambda x: x if isinstance(x, str) else json.dumps(x))(lookup(m.group(1))), v
            )
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(template)


def prompt_with_context(request: AgentRequest) -> str:
    if not request.context:
        return request.prompt
    parts = [f"{c.get('description') or 'Context'}:\n{c.get('value', '')}" for c in request.context]
    return request.prompt + "\n\n" + "\n\n".join(parts)


def chat_messages(request: AgentRequest) -> list[dict[str, Any]]:
    """The conversation as chat messages, this turn's last: `{role, content}`, the context given
    with the first user message (as `prompt_with_context` gives it to a run of one turn)."""
    out: list[dict[str, Any]] = []
    for m in request.messages:
        if m["role"] == "user" and not any(x["role"] == "user" for x in out):
            m = {**m, "content": prompt_with_context(request.model_copy(update={"prompt": str(m["content"])}))}
        out.append(m)
    return out


# Where an agent's answer may carry the session id of its side of a conversation.
SESSION_KEYS = ("session_id", "sessionId", "thread_id", "threadId")
# The placeholders that carry a conversation to the agent: a body template without any cannot.
CONVERSATION_PLACEHOLDERS = ("messages", "history", "conversation_id", "session_id")


@dataclass
class RunBudget:
    """One run's time limit as the retry loop sees it, and the attempts that failed so far."""

    limit_s: float
    deadline: float  # event-loop time
    failed: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, limit_s: float) -> RunBudget:
        return cls(limit_s, asyncio.get_running_loop().time() + limit_s)

    def timed_out(self, events: str = "") -> str:
        """The message of a run that ran out of time, with the last failed attempt when there was one."""
        msg = f"run did not finish within timeout_s={self.limit_s:g}s{events}"
        if self.failed:
            n = len(self.failed)
            msg += f" ({n} failed attempt{'s' if n > 1 else ''}, the last: {self.failed[-1]})"
        return msg


JSON_OR_TEXT = "JSON or plain text"


def body_start(text: str, n: int = 120) -> str:
    text = " ".join(text.split())
    return text[:n] + ("..." if len(text) > n else "")


def looks_like_html(text: str) -> bool:
    return text.lstrip()[:15].lower().startswith(("<!doctype html", "<html", "<head", "<body"))


def readable_answer_type(mime: str) -> bool:
    """JSON (any `json` media type), plain text or markdown, or no content type at all."""
    return "json" in mime or mime in ("", "text/plain", "text/markdown")


def media_type(response: httpx.Response) -> str:
    """The response's media type (`application/json`), lower case, without parameters; '' if none."""
    content_type: str = response.headers.get("content-type", "")  # httpx types Headers.get as Any
    return content_type.split(";")[0].strip().lower()


async def close(response: httpx.Response) -> None:
    """Close `response`, and break the cycle httpx's client makes between a streamed response and
    its stream: left in place, every response (with its request, headers and the pool's response
    object) waited for the garbage collector, whose collections took about a fifth of the CPU of
    1,000 HTTP tests at concurrency 64 (benchmarks/connectors_http.py)."""
    try:
        await response.aclose()
    finally:
        response.stream = _CLOSED


_CLOSED = httpx.ByteStream(b"")


class HttpBase(RealConnector):
    """Shared HTTP plumbing: pooled client, auth, trace headers, retries, size cap."""

    settings_model = HttpSettings
    settings: HttpSettings

    def __init__(self, agent: Any):
        super().__init__(agent)
        s = self.settings
        self.auth = Authenticator(s.auth, self.secrets, f"agents.{agent.key}.settings.auth")
        collect_sensitive(s.headers, self.secrets)
        register_log_secrets(self.secrets)
        self._client: httpx.AsyncClient | None = None
        self._requests: RequestBuilder | None = None

    @property
    def endpoint(self) -> str:
        value = self.agent.settings.get("endpoint") or ""
        # The configured form: `${NAME}` references stay references, resolved secrets never show.
        return self.secrets.scrub_text(value if isinstance(value, str) else str(display_value(value)))

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            s = self.settings
            self._client = build_client(
                pool=s.effective_pool,
                max_connections=s.max_connections,
                timeout_s=s.request_timeout_s,
                connect_timeout_s=s.connect_timeout_s,
                # One TLS context: loading the CA bundle costs ~30 ms.
                verify=httpx.create_ssl_context(verify=True) if s.verify_tls else False,
                http2=s.http2,
                proxy=s.proxy,
            )
            self._requests = RequestBuilder(self._client)
        return self._client

    async def aclose(self) -> None:
        client, self._client, self._requests = self._client, None, None
        if client is not None:
            await client.aclose()

    # -- request building ---------------------------------------------------
    def template_values(self, request: AgentRequest) -> dict[str, Any]:
        return {
            "prompt": request.prompt,
            "context": [dict(c) for c in request.context],
            "run_id": request.run_id,
            "trace_id": request.trace_id,
            "traceparent": request.traceparent,
            "test_id": request.test_id,
            "model": self.settings.model,
            "provisioned": dict(request.provisioned),
            "files": dict(request.files),
            "env": dict(request.env),
            "prompt_with_context": prompt_with_context(request),
            "messages": chat_messages(request),
            "history": [dict(m) for m in request.history],
            "turn": request.turn,
            "conversation_id": request.conversation_id,
            # the id the agent gave in an earlier turn, else the conversation's own
            "session_id": request.session.get("session_id") or request.conversation_id,
        }

    def default_body(self, request: AgentRequest) -> Any:
        body: dict[str, Any] = {
            "prompt": request.prompt,
            "context": [dict(c) for c in request.context],
            "run_id": request.run_id,
        }
        if self.settings.model:
            body["model"] = self.settings.model
        if request.provisioned:
            body["provisioned"] = dict(request.provisioned)
        if request.files:
            body["files"] = dict(request.files)
        if request.env:  # the test's `agent.run(env=...)`: a REST agent has no process env to set
            body["env"] = dict(request.env)
        if request.turn:  # a turn of a conversation: the messages so far, and its ids
            body["messages"] = chat_messages(request)
            body["conversation_id"] = request.conversation_id
            if request.session.get("session_id"):
                body["session_id"] = request.session["session_id"]
        body.update(self.settings.body)
        return body

    def conversation_problem(self) -> str | None:
        tpl = self.settings.body_template
        if tpl is None or callable(tpl):
            return None
        used = set(_PLACEHOLDER.findall(json.dumps(tpl, default=str)))
        if not any(name.split(".")[0] in CONVERSATION_PLACEHOLDERS for name in used):
            return (
                "its body_template carries none of {{messages}}, {{history}}, {{conversation_id}} or "
                "{{session_id}}, so the agent would see each message without the ones before"
            )
        return None

    def session_of(self, result: RunResult) -> dict[str, Any]:
        """The session id the agent's answer gave (`response_paths.session_id`, else a top-level
        session_id, sessionId, thread_id or threadId), for the next turn's `{{session_id}}`."""
        body = next((e.get("body") for e in reversed(result.raw_events) if isinstance(e, dict) and "body" in e), None)
        if not isinstance(body, Mapping):
            return {}
        path = self.settings.response_paths.get("session_id")
        try:
            found = get_path(body, path) if path else next((body[k] for k in SESSION_KEYS if body.get(k)), None)
        except KeyError:
            found = None
        return {"session_id": str(found)} if isinstance(found, (str, int)) and str(found) else {}

    def build_body(self, request: AgentRequest) -> Any:
        tpl = self.settings.body_template
        if tpl is None:
            return self.default_body(request)
        if callable(tpl):
            return tpl(request)
        try:
            return fill_template(tpl, self.template_values(request))
        except AgentError as exc:
            raise self.fail(str(exc)) from None

    def build_headers(self, request: AgentRequest, accept: str) -> dict[str, str]:
        return {
            "content-type": "application/json",
            "accept": accept,
            "traceparent": request.traceparent,
            RUN_ID_HEADER: request.run_id,
            **self.settings.headers,
        }

    async def prepare(self, request: AgentRequest, body: Any, accept: str) -> tuple[str, str, dict[str, str], bytes]:
        """Apply the before_request hook, serialize, then authenticate (SigV4 signs the final bytes)."""
        outgoing = {
            "method": self.settings.method,
            "url": self.settings.endpoint,
            "headers": self.build_headers(request, accept),
            "json": body,
        }
        outgoing = await self.apply_before(outgoing, request)
        content = outgoing.get("content")
        if content is None:
            content = json.dumps(outgoing.get("json"), ensure_ascii=False, default=str).encode()
        elif isinstance(content, str):
            content = content.encode()
        headers = {str(k): str(v) for k, v in outgoing["headers"].items()}
        if self.before_request is not None:  # a hook may have added credentials
            collect_sensitive(headers, self.secrets)
            register_log_secrets(self.secrets)
        headers = self.auth.apply(outgoing["method"], outgoing["url"], headers, content)
        return outgoing["method"], outgoing["url"], headers, content

    # -- sending --------------------------------------------------------------
    async def send(
        self,
        request: AgentRequest,
        body: Any,
        accept: str = "application/json",
        *,
        budget: RunBudget | None = None,
    ) -> tuple[httpx.Response, int, float]:
        """Send with retries; return an open streaming 2xx response, the retry count and the
        deadline of the successful attempt. Retries happen only before any response body is read.

        With `budget`, each failed attempt is noted on it, and a retry whose wait (Retry-After
        included) would not fit in what is left of the run fails now, naming the cause."""
        method, url, headers, content = await self.prepare(request, body, accept)
        client = self.client
        assert self._requests is not None  # built with the client
        policy = self.settings.retry
        retries = 0
        loop = asyncio.get_running_loop()
        while True:
            deadline = loop.time() + self.settings.request_timeout_s
            reason: str
            retry_after = None
            try:
                async with asyncio.timeout_at(deadline):
                    response = await client.send(self._requests.build(method, url, headers, content), stream=True)
            except TimeoutError:
                raise self.fail(
                    f"no response within request_timeout_s={self.settings.request_timeout_s:g}s"
                    + (f" (after {retries} retries)" if retries else "")
                ) from None
            except (
                httpx.ConnectError,
                httpx.ConnectTimeout,
                httpx.RemoteProtocolError,
                httpx.ReadError,
                httpx.WriteError,
            ) as exc:
                reason = describe_transport_error(exc)
            except httpx.TimeoutException:
                raise self.fail(f"no response within request_timeout_s={self.settings.request_timeout_s:g}s") from None
            except (httpx.HTTPError, aiohttp.ClientError) as exc:  # the aiohttp pool lets some through unmapped
                raise self.fail(describe_transport_error(exc)) from exc
            else:
                if 200 <= response.status_code < 300:
                    return response, retries, deadline
                snippet = await self._snippet(response)
                reason = f"HTTP {response.status_code}" + (" (rate limited)" if response.status_code == 429 else "")
                reason += f": {snippet}" if snippet else ""
                retry_after = response.headers.get("retry-after")
                if response.status_code not in policy.statuses:
                    raise self.fail(reason)
            gave_up = f"gave up after {retries + 1} attempt{'s' if retries else ''}"
            if retries >= policy.max_retries:
                raise self.fail(f"{reason} ({gave_up})")
            wait = policy.delay(retries, retry_after)
            if budget is not None:
                budget.failed.append(reason)
                left = budget.deadline - loop.time()
                hinted = parse_retry_after(retry_after)
                if hinted is not None and hinted > left:
                    raise self.fail(
                        f"{reason}; Retry-After asks for {hinted:.0f}s but only {max(left, 0.0):.1f}s of the "
                        f"run's timeout_s={budget.limit_s:g}s are left ({gave_up})"
                    )
                if wait > left:
                    raise self.fail(
                        f"{reason}; the {wait:.1f}s backoff before the next retry does not fit in the "
                        f"{max(left, 0.0):.1f}s left of the run's timeout_s={budget.limit_s:g}s ({gave_up})"
                    )
            await asyncio.sleep(wait)
            retries += 1

    async def _snippet(self, response: httpx.Response, limit: int = 300) -> str:
        try:
            data = b""
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) >= limit:
                    break
        except httpx.HTTPError:
            pass
        finally:
            await close(response)
        text = data[:limit].decode("utf-8", "replace").strip()
        return text + ("..." if len(data) > limit else "")

    def unexpected(self, response: httpx.Response, body: str, expected: str) -> AgentError:
        """The error for a response the connector cannot read as an answer: names the status, the
        content type and the start of the body."""
        ctype = response.headers.get("content-type") or "none"
        return self.fail(
            f"unexpected response: HTTP {response.status_code} with content type {ctype!r} "
            f"(expected {expected}); body starts {body_start(body)!r}"
        )

    def too_large(self, size: int | None = None) -> AgentError:
        cap = self.settings.max_response_bytes
        what = f"Content-Length {size}" if size is not None else f"more than {cap} bytes"
        return self.fail(f"response too large: {what} exceeds max_response_bytes={cap}")

    async def read_body(self, response: httpx.Response) -> bytes:
        cap = self.settings.max_response_bytes
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > cap:
            await close(response)
            raise self.too_large(int(declared))
        chunks, size = [], 0
        try:
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > cap:
                    raise self.too_large()
                chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise self.fail(f"response cut off after {size} bytes: {describe_transport_error(exc)}") from exc
        finally:
            await close(response)
        return b"".join(chunks)

    def decode(self, data: bytes, response: httpx.Response) -> str:
        charset = response.charset_encoding or "utf-8"
        try:
            return data.decode(charset)
        except UnicodeDecodeError as exc:
            bad = data[exc.start : exc.start + 1].hex()
            raise self.fail(
                f"response is not valid {charset.upper()} text: byte 0x{bad} at offset {exc.start} ({exc.reason})"
            ) from None
        except LookupError:
            raise self.fail(f"response declares unknown charset {charset!r}") from None


class HttpConnector(HttpBase):
    """REST agents: one request, one JSON (or text) response."""

    name = "http"

    async def run(self, request: AgentRequest) -> RunResult:
        started = time.perf_counter()
        limit = self.run_timeout(request)
        budget = RunBudget.start(limit)
        try:
            async with asyncio.timeout(limit):
                response, retries, deadline = await self.send(request, self.build_body(request), budget=budget)
                try:
                    async with asyncio.timeout_at(deadline):
                        raw = await self.read_body(response)
                except TimeoutError:
                    raise self.fail(
                        f"response body not received within request_timeout_s={self.settings.request_timeout_s:g}s"
                    ) from None
        except TimeoutError:
            raise self.fail(budget.timed_out()) from None
        if not readable_answer_type(media_type(response)):  # before decoding: a binary body is no text
            raise self.unexpected(response, raw[:300].decode("utf-8", "replace"), JSON_OR_TEXT)
        text = self.decode(raw, response)
        data = self.parse_json(text, response)
        if not self.settings.response_paths and (problem := shape_problem(data)):
            raise self.fail(
                f"unexpected response shape: HTTP {response.status_code}, {problem}; body starts "
                f"{body_start(text)!r} (set response_paths to point at the answer)"
            )
        try:
            output, steps, usage = parse_body(data, self.settings.response_paths, self.settings.model)
            artifacts = artifacts_of(data)
        except ParseError as exc:
            raise self.fail(str(exc)) from None
        if retries:
            usage = usage.model_copy(update={"retries": retries})
        raw_event = {"type": "http_response", "status": response.status_code, "body": data}
        result = self.run_result(
            request,
            output,
            steps,
            usage=usage,
            raw_events=(raw_event,),
            duration_ms=(time.perf_counter() - started) * 1000,
            artifacts=artifacts,
        )
        seen = (
            {"status": response.status_code, "headers": redact_headers(dict(response.headers)), "body": data}
            if self.after_response is not None
            else None
        )

        def silence() -> str:
            if not text.strip():
                return f"HTTP {response.status_code} with an empty body"
            return f"HTTP {response.status_code} with no output in the body, which starts {body_start(text)!r}"

        return await self.apply_after(seen, result, silence=silence)

    def parse_json(self, text: str, response: httpx.Response) -> Any:
        """The decoded JSON body, or the text itself for plain-text agents (text/plain, text/markdown
        or no content type). An HTML page, or any other content type, is not an answer."""
        mime = media_type(response)
        is_json = "json" in mime
        if looks_like_html(text) or not readable_answer_type(mime):
            raise self.unexpected(response, text, JSON_OR_TEXT)
        if not text.strip() or (not is_json and not text.lstrip().startswith(("{", "["))):
            return text  # plain-text agents: the body is the answer (an empty one is no answer, see run)
        try:
            return json.loads(text)
        except ValueError as exc:
            raise self.fail(
                f"malformed JSON response: {exc}; HTTP {response.status_code} with content type "
                f"{response.headers.get('content-type') or 'none'!r}, body starts {body_start(text)!r}"
            ) from None


def shape_problem(data: Any) -> str | None:
    """Why a decoded JSON body is not in a shape the connector reads an answer from, or None."""
    if isinstance(data, str):
        return None
    if isinstance(data, Mapping):
        known = ("choices", *OUTPUT_KEYS, *TOOL_KEYS, *THINKING_KEYS, *STEP_KEYS)
        if any(k in data for k in known):
            return None
        keys = ", ".join(map(str, list(data)[:10])) or "none"
        return f"a JSON object without any answer field ({', '.join(OUTPUT_KEYS)}, choices, ...); its keys: {keys}"
    if isinstance(data, list) and data and all(isinstance(p, Mapping) and "text" in p for p in data):
        return None  # content parts
    return f"a JSON {type(data).__name__ if data is not None else 'null'} where an answer was expected"
