"""The `openai` judge provider: any OpenAI-compatible chat-completions endpoint through httpx
(OpenAI, vLLM, Ollama, LiteLLM, ...).

Settings: `base_url` (default https://api.openai.com/v1), `api_key_env` (name of the environment
variable holding the key; default OPENAI_API_KEY, optional when unset for keyless local servers),
`temperature` (0), `max_tokens`, `structured_output` (default true: ask for the verdict with
`response_format` json_schema), `json_mode` (send response_format json_object when no schema is
sent), `timeout_s` (60), `headers` (extra, non-secret headers), `max_response_bytes` (10 MiB: an
answer is read as a stream and no further than this; a larger one is an errored verdict naming
the limit, so a runaway or hostile endpoint cannot fill the process's memory).

Many OpenAI-compatible servers reject `response_format` json_schema with a 400 (or 422): the call
is made again without it, once, and the endpoint is remembered for the rest of the run.
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from agent_health.config.secrets import redact_url, register_secret
from agent_health.connectors.transport import build_client
from agent_health.errors import ConfigError
from agent_health.judges.chat import (
    AnswerSchema,
    ChatClient,
    ChatMessage,
    ChatResponse,
    ProviderError,
    RateLimited,
    StructuredOutputRejected,
    ToolCall,
    ToolSpec,
)
from agent_health.model import Usage

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
CUT_OFF = ("length",)  # finish_reason of an answer stopped at max_tokens (or the context window)
DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024  # as an agent's max_response_bytes
_ERROR_BYTES = 4096  # read of an error answer: enough for its excerpt


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to exponential backoff


def _excerpt(text: str, n: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n] + "…"


class OpenAIChat(ChatClient):
    """Chat completions over httpx; one pooled client per provider/model."""

    provider = "openai"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        s = self.settings
        if "api_key" in s:
            raise ConfigError(
                "judge settings: put the OpenAI key in an environment variable and name it with "
                "api_key_env, never api_key in the configuration"
            )
        self.base_url = str(s.get("base_url") or DEFAULT_BASE_URL).rstrip("/")
        if password := urlsplit(self.base_url).password:  # a proxy's user:password, as the key
            register_secret(password, unquote(password), setting="judge settings base_url (its password)")
        key_env = s.get("api_key_env")
        key = os.environ.get(key_env or DEFAULT_KEY_ENV)
        if key_env and not key:
            raise ConfigError(f"judge settings: environment variable {key_env} (api_key_env) is not set")
        # a provider that echoes the key (reasoning, a 401 body) must not store it
        register_secret(key, setting=f"the judge's API key (${key_env or DEFAULT_KEY_ENV})")
        self.temperature = s.get("temperature", 0)
        self.max_tokens = s.get("max_tokens")
        self.json_mode = bool(s.get("json_mode", False))
        headers = {str(k): str(v) for k, v in (s.get("headers") or {}).items()}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        timeout_s = float(s.get("timeout_s", 60.0))
        self.max_response_bytes = int(s.get("max_response_bytes") or DEFAULT_MAX_RESPONSE_BYTES)
        # the connectors' pool (aiohttp): one HTTP stack, and judge calls as concurrent as tests
        self._client = build_client(
            base_url=self.base_url, headers=headers, timeout_s=timeout_s, connect_timeout_s=timeout_s
        )

    @property
    def label(self) -> str:
        return f"openai:{self.model} at {redact_url(self.base_url)}"

    @property
    def max_output_tokens(self) -> int | None:
        return int(self.max_tokens) if self.max_tokens else None

    @property
    def identity(self) -> str:
        # Two OpenAI-compatible servers may serve different weights under the same model name.
        return redact_url(self.base_url)

    def _body(
        self,
        messages: list[ChatMessage],
        system: str | None,
        tools: tuple[ToolSpec, ...],
        json_mode: bool,
        schema: AnswerSchema | None = None,
    ) -> dict[str, Any]:
        wire: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        for m in messages:
            if m.role == "tool":
                wire.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
            elif m.tool_calls:
                wire.append(
                    {
                        "role": "assistant",
                        "content": m.content or None,
                        "tool_calls": [
                            {
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": json.dumps(c.args)},
                            }
                            for c in m.tool_calls
                        ],
                    }
                )
            else:
                wire.append({"role": m.role, "content": m.content})
        body: dict[str, Any] = {"model": self.model, "messages": wire, "temperature": self.temperature}
        if self.max_tokens:
            body["max_tokens"] = self.max_tokens
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in tools
            ]
        if schema is not None:
            spec: dict[str, Any] = {"name": schema.name, "schema": dict(schema.schema), "strict": schema.strict}
            if schema.description:
                spec["description"] = schema.description
            body["response_format"] = {"type": "json_schema", "json_schema": spec}
        elif json_mode and self.json_mode and not tools:
            body["response_format"] = {"type": "json_object"}
        return body

    async def _call(
        self,
        messages: list[ChatMessage],
        *,
        system: str | None,
        tools: tuple[ToolSpec, ...],
        json_mode: bool,
        schema: AnswerSchema | None,
    ) -> ChatResponse:
        body = self._body(messages, system, tools, json_mode, schema)
        try:
            async with self._client.stream("POST", "/chat/completions", json=body) as response:
                status = response.status_code
                if status in (429, 502, 503, 504):
                    raise RateLimited(f"HTTP {status}: {await self._excerpt(response)}", _retry_after(response))
                if status in (400, 422) and schema is not None:
                    # servers word this every way ("response_format", "json_schema", "extra fields not
                    # permitted", ...): the plain request decides whether the schema was the problem
                    raise StructuredOutputRejected(f"{self.label}: HTTP {status}: {await self._excerpt(response)}")
                if status >= 400:
                    raise ProviderError(f"{self.label}: HTTP {status}: {await self._excerpt(response)}")
                raw = await self._read(response)
        except httpx.HTTPError as exc:
            raise ProviderError(f"{self.label}: {type(exc).__name__}: {exc}") from exc
        try:
            data = json.loads(raw)
            choice = data["choices"][0]
            message = choice["message"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            text = raw[:_ERROR_BYTES].decode("utf-8", "replace")
            raise ProviderError(f"{self.label}: unexpected response shape: {_excerpt(text)}") from exc
        calls: list[Any] = []
        for c in message.get("tool_calls") or []:
            fn = c.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                args = {"_unparsed": fn.get("arguments")}
            calls.append(
                ToolCall(
                    id=str(c.get("id") or f"call_{len(calls)}"),
                    name=str(fn.get("name")),
                    args=args if isinstance(args, dict) else {"value": args},
                )
            )
        usage = data.get("usage") or {}
        model = data.get("model") or self.model
        finish = choice.get("finish_reason")
        return ChatResponse(
            text=message.get("content") or "",
            tool_calls=tuple(calls),
            model=model,
            cut_off=f'finish_reason "{finish}"' if finish in CUT_OFF else "",
            usage=Usage.of(
                int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0), model=model, llm_calls=1
            ),
        )

    async def _read(self, response: httpx.Response) -> bytes:
        """The answer's body, read as it arrives and no further than `max_response_bytes` (the
        connection is dropped past it): a ProviderError naming the limit and the judge."""
        cap = self.max_response_bytes
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > cap:
            raise self._too_large(f"Content-Length {declared}")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():  # decoded: a compressed answer is bounded as it unpacks
            size += len(chunk)
            if size > cap:
                raise self._too_large(f"more than {cap} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self, what: str) -> ProviderError:
        return ProviderError(
            f"{self.label}: answer too large: {what} exceeds max_response_bytes={self.max_response_bytes} "
            "(a setting of the judge provider)"
        )

    async def _excerpt(self, response: httpx.Response) -> str:
        """The start of an error answer (its first few kB; the rest is never read)."""
        data = b""
        try:
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) >= _ERROR_BYTES:
                    break
        except httpx.HTTPError:
            pass
        return _excerpt(data[:_ERROR_BYTES].decode(response.encoding or "utf-8", "replace"))

    async def aclose(self) -> None:
        await self._client.aclose()
