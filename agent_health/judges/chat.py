"""Provider-neutral chat types and the rate-limit backoff shared by the LLM providers.

The judge logic (contextual, agentic, rubric, the `llm` helper) speaks these types; `openai.py` and
`bedrock.py` translate them to their wire formats. Keeping one shape means every judging mode works
with every provider.
"""

from __future__ import annotations

import abc
import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from agent_health.model import Usage
from agent_health.spend import ASSUMED_OUTPUT_TOKENS, Held, current_tab, estimate_tokens, metered

T = TypeVar("T")


class ToolCall(BaseModel):
    """A tool call the model asked for."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="Provider call id, echoed back with the result.")
    name: str = Field(description="Tool name.")
    args: dict[str, Any] = Field(default_factory=dict, description="Parsed arguments.")


class ChatMessage(BaseModel):
    """One conversation turn. `tool` turns carry one tool result for `tool_call_id`."""

    model_config = ConfigDict(frozen=True)

    role: Literal["user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = Field(False, description="A tool turn that reports a failed tool call.")


class ToolSpec(BaseModel):
    """A tool offered to the model (JSON-schema parameters)."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True)
class AnswerSchema:
    """The JSON schema an answer must follow, for providers' structured outputs (OpenAI-compatible
    `response_format` json_schema, Bedrock forced tool use). The answer still goes through the
    same parsing and nonce check: a provider may ignore or reject the schema."""

    name: str
    schema: Mapping[str, Any]
    description: str = ""
    strict: bool = field(default=True, compare=False)


class ChatResponse(BaseModel):
    """What one model call returned."""

    model_config = ConfigDict(frozen=True)

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Field(default_factory=Usage)
    model: str | None = None
    cut_off: str = Field(
        "",
        description="How the provider said the answer was cut off at a length limit (e.g. "
        "'finish_reason \"length\"'); empty when it ended on its own. A cut-off answer is never a verdict.",
    )


class ProviderError(Exception):
    """A provider call failed for good (bad request, auth, server error, unreachable)."""


class AnswerCutOff(Exception):
    """The model stopped at its length limit: what it wrote is a fragment, not an answer (a fragment
    that happens to parse, such as `{"pass": true, "sc`, must never become a verdict)."""

    def __init__(self, response: ChatResponse, who: str = ""):
        self.response = response
        super().__init__(
            f"{who + ': ' if who else ''}the answer was cut off at the model's length limit ({response.cut_off}); "
            "raise the provider's max tokens setting or ask for a shorter answer"
        )


class StructuredOutputRejected(ProviderError):
    """The endpoint refused a request because of its structured-output part (a 400 naming it)."""


class RateLimited(Exception):
    """The provider asked us to slow down (HTTP 429/503, Bedrock throttling); retried with backoff."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class Backoff(BaseModel):
    """Rate-limit retry policy."""

    model_config = ConfigDict(frozen=True)

    max_retries: int = Field(4, description="Retries after a rate-limit answer before giving up.")
    base_s: float = Field(1.0, description="First backoff delay; doubles each retry (with jitter).")
    max_s: float = Field(30.0, description="Cap on one delay, also applied to Retry-After.")

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_s)
        return min(self.max_s, self.base_s * (2.0**attempt)) * (0.5 + random.random() / 2)

    async def run(self, call: Callable[[], Awaitable[T]], what: str) -> tuple[T, int]:
        """Run `call`, retrying on RateLimited; returns (result, retries made)."""
        for attempt in range(self.max_retries + 1):
            try:
                return await call(), attempt
            except RateLimited as exc:
                if attempt >= self.max_retries:
                    raise ProviderError(f"{what}: still rate limited after {self.max_retries} retries: {exc}") from exc
                await asyncio.sleep(self.delay(attempt, exc.retry_after))
        raise AssertionError("unreachable")  # pragma: no cover


class ChatClient(abc.ABC):
    """One provider + model. Raises ProviderError on failure; backs off on rate limits."""

    provider: str = ""

    def __init__(
        self,
        model: str,
        settings: dict[str, Any] | None = None,
        backoff: Backoff | None = None,
        *,
        no_structured: set[str] | None = None,
    ):
        self.model = model
        self.settings = dict(settings or {})  # the provider's settings (each subclass reads its own)
        self.backoff = backoff or Backoff()
        # Endpoints (or models) found to reject structured outputs; shared by the clients of one
        # judge service, so each is tried once per run.
        self.no_structured = no_structured if no_structured is not None else set()
        self.structured_output = bool(self.settings.get("structured_output", True))

    @property
    def structured_key(self) -> str:
        """What decides whether structured outputs are accepted (an endpoint, or a model)."""
        return f"{self.provider}:{self.identity or self.model}"

    @property
    def structured(self) -> bool:
        """Whether to ask for structured outputs (False once the provider rejected them)."""
        return self.structured_output and self.structured_key not in self.no_structured

    def reject_structured(self) -> None:
        self.no_structured.add(self.structured_key)

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"

    @property
    def identity(self) -> str:
        """What, besides the model id, decides which model answers (part of cache keys)."""
        return ""

    @property
    def max_output_tokens(self) -> int | None:
        """The most tokens one answer may have (the provider's max tokens setting), None when the
        client sets no bound; what a call's estimate counts for its answer."""
        return None

    async def chat(
        self,
        messages: list[ChatMessage],
        *,
        system: str | None = None,
        tools: tuple[ToolSpec, ...] = (),
        json_mode: bool = False,
        schema: AnswerSchema | None = None,
    ) -> ChatResponse:
        """One model call, rate limits retried; `usage.retries` counts the retries.

        With `schema`, the provider is asked for a structured answer where it can give one; an
        endpoint that rejects the request for it is asked again without, once, and remembered."""
        wanted = schema if schema is not None and self.structured else None
        held = await self._hold(messages, system, tools, wanted)
        try:
            response = await self._chat(messages, system, tools, json_mode, wanted)
        except BaseException:
            if held is not None:
                held.release()
            raise
        if held is not None:
            held.settle(response.usage)
        metered(response.usage.model_copy(update={"model": self.model or response.usage.model}))
        return response

    async def _hold(
        self, messages: list[ChatMessage], system: str | None, tools: tuple[ToolSpec, ...], schema: AnswerSchema | None
    ) -> Held | None:
        """Reserve the call's estimated cost on the running test's tab (agent_health.spend), or
        raise `SpendRefused` so it is not made; None when there is no tab (no budget, no cap).
        The input is estimated from everything sent: the system prompt, the messages, the tools
        and the answer schema; the answer at `max_output_tokens`."""
        tab = current_tab()
        if tab is None:
            return None
        sent = json.dumps(
            [
                system or "",
                [m.model_dump(mode="json") for m in messages],
                [t.model_dump(mode="json") for t in tools],
                dict(schema.schema) if schema is not None else None,
            ],
            ensure_ascii=False,
        )
        output = self.max_output_tokens or ASSUMED_OUTPUT_TOKENS
        return await tab.hold(self.model, estimate_tokens(sent), output)

    async def _chat(
        self,
        messages: list[ChatMessage],
        system: str | None,
        tools: tuple[ToolSpec, ...],
        json_mode: bool,
        wanted: AnswerSchema | None,
    ) -> ChatResponse:
        try:
            response, retries = await self.backoff.run(
                lambda: self._call(messages, system=system, tools=tools, json_mode=json_mode, schema=wanted),
                self.label,
            )
        except StructuredOutputRejected:
            response, retries = await self.backoff.run(
                lambda: self._call(messages, system=system, tools=tools, json_mode=json_mode, schema=None),
                self.label,
            )
            self.reject_structured()  # only now: the plain request worked, so the schema was the problem
        if retries:
            response = response.model_copy(update={"usage": response.usage.model_copy(update={"retries": retries})})
        return response

    @abc.abstractmethod
    async def _call(
        self,
        messages: list[ChatMessage],
        *,
        system: str | None,
        tools: tuple[ToolSpec, ...],
        json_mode: bool,
        schema: AnswerSchema | None,
    ) -> ChatResponse:
        """One attempt; raise RateLimited to be retried, ProviderError to fail, and
        StructuredOutputRejected when the request for `schema` was refused."""

    async def aclose(self) -> None:
        """Release connections."""
