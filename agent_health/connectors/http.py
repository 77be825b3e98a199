"""The `http` connector: one POST per run to a REST agent, over pooled keep-alive connections.

Settings (see `HttpSettings`): `endpoint`, `headers`, `auth`, `body` (extra fields) or
`body_template`, `response_paths`, `request_timeout_s`, `timeout_s` (per run), `retry`,
`max_response_bytes`, hooks. The default body is `{prompt, context, run_id}` plus `model`,
`provisioned` and `files` when set, plus `body`. Every request carries `traceparent` and
`x-agent-health-run-id`.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import time
from typing import Any, Literal

import httpx
from pydantic import Field

from agent_health.config.secrets import collect_sensitive, display_value, redact_headers, register_log_secrets
from agent_health.connectors.auth import Authenticator, AuthSettings
from agent_health.connectors.common import ConnectorSettings, RealConnector
from agent_health.connectors.parsing import ParseError, get_path, parse_body
from agent_health.connectors.retry import RetryPolicy
from agent_health.errors import AgentError
from agent_health.model import RunResult
from agent_health.model.agent import AgentRequest

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
        "{{messages}}, {{provisioned.NAME}}...; or fn(request) -> body.",
    )
    response_paths: dict[str, str] = Field(
        default_factory=dict,
        description="Dotted paths of output, tool_calls, thinking, trajectory, usage in the response.",
    )
    request_timeout_s: float = Field(60.0, gt=0, description="Per-request timeout (idle timeout when streaming).")
    connect_timeout_s: float = Field(10.0, gt=0, description="Connection timeout.")
    retry: RetryPolicy = Field(default_factory=RetryPolicy, description="Retries of connection errors, 429, 5xx.")
    max_response_bytes: int = Field(10 * 1024 * 1024, gt=0, description="Larger responses are an error.")
    max_connections: int = Field(100, gt=0, description="Pooled connections to the agent.")
    pool: Literal["lean", "httpx"] = Field(
        "lean", description="Connection pool: lean (see connectors.transport) or httpx's default one."
    )
    verify_tls: bool = Field(True, description="Verify the agent's TLS certificate.")


def describe_transport_error(exc: BaseException) -> str:
    """A short human reason for an httpx transport error (httpx often says only 'All connection attempts failed')."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cur, ConnectionResetError):
            return "connection reset by the agent"
        cur = cur.__cause__ or cur.__context__
    if isinstance(exc, httpx.ConnectTimeout):
        return "connection timed out"
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

    @property
    def endpoint(self) -> str:
        value = self.agent.settings.get("endpoint") or ""
        # The configured form: `${NAME}` references stay references, resolved secrets never show.
        return self.secrets.scrub_text(value if isinstance(value, str) else str(display_value(value)))

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            s = self.settings
            # One TLS context: loading the CA bundle costs ~30 ms.
            verify = httpx.create_ssl_context(verify=True) if s.verify_tls else False
            transport = None
            if s.pool == "lean":
                from agent_health.connectors.transport import LeanTransport

                transport = LeanTransport(
                    s.max_connections, verify if isinstance(verify, ssl.SSLContext) else _no_verify_context()
                )
            limits = httpx.Limits(max_connections=s.max_connections, max_keepalive_connections=s.max_connections)
            self._client = httpx.AsyncClient(
                limits=limits,
                timeout=httpx.Timeout(s.request_timeout_s, connect=s.connect_timeout_s),
                verify=verify,
                transport=transport,
                follow_redirects=True,
            )
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
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
            "prompt_with_context": prompt_with_context(request),
            "messages": [{"role": "user", "content": prompt_with_context(request)}],
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
        body.update(self.settings.body)
        return body

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
        self, request: AgentRequest, body: Any, accept: str = "application/json"
    ) -> tuple[httpx.Response, int, float]:
        """Send with retries; return an open streaming 2xx response, the retry count and the
        deadline of the successful attempt. Retries happen only before any response body is read."""
        method, url, headers, content = await self.prepare(request, body, accept)
        policy = self.settings.retry
        retries = 0
        while True:
            deadline = asyncio.get_running_loop().time() + self.settings.request_timeout_s
            reason: str
            retry_after = None
            try:
                async with asyncio.timeout_at(deadline):
                    response = await self.client.send(
                        self.client.build_request(method, url, headers=headers, content=content), stream=True
                    )
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
            except httpx.HTTPError as exc:
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
            if retries >= policy.max_retries:
                attempts = retries + 1
                raise self.fail(f"{reason} (gave up after {attempts} attempt{'s' if attempts > 1 else ''})")
            await asyncio.sleep(policy.delay(retries, retry_after))
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
            await response.aclose()
        text = data[:limit].decode("utf-8", "replace").strip()
        return text + ("..." if len(data) > limit else "")

    def too_large(self, size: int | None = None) -> AgentError:
        cap = self.settings.max_response_bytes
        what = f"Content-Length {size}" if size is not None else f"more than {cap} bytes"
        return self.fail(f"response too large: {what} exceeds max_response_bytes={cap}")

    async def read_body(self, response: httpx.Response) -> bytes:
        cap = self.settings.max_response_bytes
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > cap:
            await response.aclose()
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
            await response.aclose()
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
        try:
            async with asyncio.timeout(limit):
                response, retries, deadline = await self.send(request, self.build_body(request))
                try:
                    async with asyncio.timeout_at(deadline):
                        raw = await self.read_body(response)
                except TimeoutError:
                    raise self.fail(
                        f"response body not received within request_timeout_s={self.settings.request_timeout_s:g}s"
                    ) from None
        except TimeoutError:
            raise self.fail(f"run did not finish within timeout_s={limit:g}s") from None
        text = self.decode(raw, response)
        data = self.parse_json(text, response)
        try:
            output, steps, usage = parse_body(data, self.settings.response_paths, self.settings.model)
        except ParseError as exc:
            raise self.fail(str(exc)) from None
        if retries:
            usage = usage.model_copy(update={"retries": retries})
        raw_event = {"type": "http_response", "status": response.status_code, "body": data}
        result = RunResult(
            output=output,
            trajectory=tuple(steps),
            run_id=request.run_id,
            trace_id=request.trace_id,
            agent=self.agent.ref,
            prompt=request.prompt,
            context=request.context,
            duration_ms=(time.perf_counter() - started) * 1000,
            usage=usage,
            raw_events=(raw_event,),
        )
        seen = (
            {"status": response.status_code, "headers": redact_headers(dict(response.headers)), "body": data}
            if self.after_response is not None
            else None
        )
        return await self.apply_after(seen, result)

    def parse_json(self, text: str, response: httpx.Response) -> Any:
        ctype = response.headers.get("content-type", "")
        stripped = text.lstrip()
        if "json" not in ctype and not stripped.startswith(("{", "[")):
            return text  # plain-text agents: the body is the answer
        try:
            return json.loads(text)
        except ValueError as exc:
            start = stripped[:80]
            raise self.fail(f"malformed JSON response: {exc}; body starts {start!r}") from None


def _no_verify_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx
