"""The `agui` connector: the AG-UI protocol over server-sent events.

Sends a `RunAgentInput`-shaped body (threadId, runId, messages, tools, context, state,
forwardedProps) and folds the event stream into a trajectory:
TEXT_MESSAGE_* -> message steps (an empty one, as servers open around tool calls, is no step),
TOOL_CALL_START/ARGS/END -> tool_call, TOOL_CALL_RESULT -> tool_result, THINKING_* / REASONING_* ->
thinking. Usage and model come from RUN_FINISHED's `usage` (AG-UI 1.0: one entry per provider and
model), its `result.usage`, or a CUSTOM event named `usage` / `agent_health.usage`. STEP_*, STATE_*,
MESSAGES_SNAPSHOT, CUSTOM, RAW and unknown events are kept in raw events. RUN_ERROR, or a stream
that ends before RUN_FINISHED, is an error naming the reason.

The test's context goes in `RunAgentInput.context`, or, with `context_as: "message"`, as a user
message before the prompt, for servers that ignore `context` (pydantic-ai's AG-UI adapter).
"""

from __future__ import annotations

import asyncio
import codecs
import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx
from pydantic import Field

from agent_health.config.secrets import SecretSet, known_secrets
from agent_health.connectors.http import (
    HttpBase,
    HttpSettings,
    RunBudget,
    close,
    describe_transport_error,
    media_type,
)
from agent_health.connectors.parsing import as_text, parse_args, role_of, usage_of
from agent_health.model import RunResult, Step, Usage
from agent_health.model.agent import AgentRequest

EVENT_STREAM = "text/event-stream"


class AguiSettings(HttpSettings):
    """Settings of the agui connector (besides the http ones)."""

    tools: list[dict[str, Any]] = Field(default_factory=list, description="Tools offered to the agent.")
    state: dict[str, Any] = Field(default_factory=dict, description="Initial shared state.")
    forwarded_props: dict[str, Any] = Field(default_factory=dict, description="forwardedProps of the input.")
    thread_id: str | None = Field(None, description="Thread id; a fresh one per run when unset.")
    context_as: Literal["context", "message"] = Field(
        "context",
        description="Where the test's context goes: RunAgentInput.context, or a user message before the prompt "
        "(for servers that ignore `context`, such as pydantic-ai's AG-UI adapter).",
    )


_LINE_END = re.compile(r"\r\n|\r|\n")


class LineSplitter:
    """The lines of an event stream as its text arrives in chunks (CRLF, CR or LF ends a line, as
    the SSE specification says). Each character is looked at once and a long line is joined once,
    so a line of many megabytes costs its length, not its length squared."""

    def __init__(self) -> None:
        self.parts: list[str] = []  # the line being received
        self.after_cr = False  # the last chunk ended with CR: a LF starting the next one is its CRLF

    def feed(self, text: str) -> list[str]:
        if self.after_cr and text.startswith("\n"):
            text = text[1:]
        self.after_cr = text.endswith("\r")
        lines, start = [], 0
        for end in _LINE_END.finditer(text):
            self.parts.append(text[start : end.start()])
            lines.append("".join(self.parts))
            self.parts, start = [], end.end()
        if start < len(text):
            self.parts.append(text[start:])
        return lines

    def close(self) -> list[str]:
        """The last line, when the stream did not end with a line end."""
        rest, self.parts = "".join(self.parts), []
        return [rest] if rest else []


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """`data:` payloads of a server-sent event stream, one per event (multi-line data joined)."""
    data: list[str] = []
    async for line in lines:
        if line == "":
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue  # comment / keep-alive
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def usage_entries(entries: list[Any]) -> Usage:
    """RUN_FINISHED's `usage` (AG-UI 1.0 TokenUsage entries) as one Usage: the tokens summed, the
    model of the entry with the most tokens."""
    counted = [e for e in entries if isinstance(e, dict)]
    if not counted:
        return Usage(unreported=True)
    parts = [usage_of(e, e.get("model")) for e in counted]
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    heaviest = max(parts, key=lambda u: u.total_tokens)
    return total.model_copy(update={"model": heaviest.model or total.model})


class _Fold:
    """Accumulates AG-UI events into steps."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.raw: list[Any] = []
        self.messages: dict[str, list[str]] = {}
        self.message_role: dict[str, str] = {}
        self.calls: dict[str, dict[str, Any]] = {}
        self.call_names: dict[str, str] = {}
        self.thinking: list[str] | None = None
        self.finished: dict[str, Any] | None = None
        self.error: str | None = None
        self.usage = Usage(unreported=True)  # until a usage event says
        self.last_text = ""
        self.head = ""  # the start of the body, for the message when no event arrives
        self.t0 = time.perf_counter()

    def _ms(self) -> float:
        return (time.perf_counter() - self.t0) * 1000

    def _close_message(self, mid: str) -> None:
        parts = self.messages.pop(mid, None)
        if parts is None:
            return
        text = "".join(parts)
        if not text.strip():  # opened and closed with nothing in it (around a tool call): no step
            return
        if self.message_role.get(mid, "assistant") == "assistant":
            self.last_text = text
        # AG-UI roles: developer speaks as the system does; anything unknown is the agent's
        role = role_of(self.message_role.get(mid)) or "assistant"
        self.steps.append(Step(kind="message", role=role, content=text, started_ms=self._ms()))

    def _close_call(self, cid: str) -> None:
        call = self.calls.pop(cid, None)
        if call is None:
            return
        self.steps.append(
            Step(
                kind="tool_call",
                tool=call["name"],
                args=parse_args("".join(call["args"])),
                call_id=cid,
                started_ms=call["at"],
                duration_ms=self._ms() - call["at"],
            )
        )

    def _close_thinking(self) -> None:
        if self.thinking is not None:
            text = "".join(self.thinking)
            if text:
                self.steps.append(Step(kind="thinking", content=text, started_ms=self._ms()))
            self.thinking = None

    def add(self, ev: dict[str, Any]) -> None:
        t = str(ev.get("type", ""))
        mid = str(ev.get("messageId", ""))
        if t in ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK"):
            self.messages.setdefault(mid, [])
            if "role" in ev:
                self.message_role[mid] = ev["role"]
            self.messages[mid].append(str(ev.get("delta") or ""))
        elif t == "TEXT_MESSAGE_END":
            self._close_message(mid)
        elif t in ("TOOL_CALL_START", "TOOL_CALL_CHUNK"):
            cid = str(ev.get("toolCallId"))
            call = self.calls.setdefault(cid, {"name": ev.get("toolCallName"), "args": [], "at": self._ms()})
            call["name"] = call["name"] or ev.get("toolCallName")
            self.call_names[cid] = call["name"]
            if ev.get("delta"):
                call["args"].append(str(ev["delta"]))
        elif t == "TOOL_CALL_ARGS":
            self.calls.setdefault(str(ev.get("toolCallId")), {"name": None, "args": [], "at": self._ms()})[
                "args"
            ].append(str(ev.get("delta") or ""))
        elif t == "TOOL_CALL_END":
            self._close_call(str(ev.get("toolCallId")))
        elif t == "TOOL_CALL_RESULT":
            cid = str(ev.get("toolCallId"))
            self._close_call(cid)
            self.steps.append(
                Step(
                    kind="tool_result",
                    tool=self.call_names.get(cid),
                    call_id=cid,
                    content=as_text(ev.get("content")),
                    started_ms=self._ms(),
                    is_error=bool(ev.get("isError") or ev.get("error")),
                )
            )
        elif t in ("THINKING_START", "REASONING_START", "THINKING_TEXT_MESSAGE_START", "REASONING_MESSAGE_START"):
            if self.thinking is None:
                self.thinking = []
        elif t in ("THINKING_TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_CHUNK"):
            (self.thinking if self.thinking is not None else self._start_thinking()).append(str(ev.get("delta", "")))
        elif t in ("THINKING_END", "REASONING_END", "THINKING_TEXT_MESSAGE_END", "REASONING_MESSAGE_END"):
            self._close_thinking()
        elif t == "RUN_FINISHED":
            self.finished = ev
            if isinstance(ev.get("usage"), list) and ev["usage"]:  # AG-UI 1.0: per provider and model
                self.usage = usage_entries(ev["usage"])
        elif t == "RUN_ERROR":
            code = f" (code {ev['code']})" if ev.get("code") else ""
            self.error = f"RUN_ERROR: {ev.get('message') or 'no message'}{code}"
        elif t == "CUSTOM" and ev.get("name") in ("usage", "agent_health.usage"):
            self.usage = usage_of(ev.get("value"))
        self.raw.append(ev)

    def _start_thinking(self) -> list[str]:
        self.thinking = []
        return self.thinking

    def open_parts(self) -> str:
        """What was cut off, for the early-end message."""
        parts = [f"message {m!r} incomplete" for m in self.messages]
        parts += [f"tool call {c!r} incomplete" for c in self.calls]
        return ", ".join(parts)

    def finish(self) -> None:
        for mid in list(self.messages):
            self._close_message(mid)
        for cid in list(self.calls):
            self._close_call(cid)
        self._close_thinking()


# Events whose `delta` continues a stream: (family, id field). A secret may arrive split across two
# deltas; each delta alone holds no secret, so they are scrubbed as the joined stream.
_STREAMS = {
    "TEXT_MESSAGE_CONTENT": ("text", "messageId"),
    "TEXT_MESSAGE_CHUNK": ("text", "messageId"),
    "TOOL_CALL_ARGS": ("args", "toolCallId"),
    "TOOL_CALL_CHUNK": ("args", "toolCallId"),
    "THINKING_TEXT_MESSAGE_CONTENT": ("thinking", "messageId"),
    "REASONING_MESSAGE_CONTENT": ("thinking", "messageId"),
    "REASONING_MESSAGE_CHUNK": ("thinking", "messageId"),
}


def scrub_streams(events: list[Any], secrets: SecretSet) -> list[Any]:
    """Raw events with every secret removed from each stream's joined deltas (the event where a
    secret starts shows REDACTED, the events that continue it lose their part)."""
    if not secrets:
        return events
    streams: dict[tuple[str, str], list[int]] = {}
    for i, ev in enumerate(events):
        kind = _STREAMS.get(str(ev.get("type"))) if isinstance(ev, dict) else None
        if kind is not None and isinstance(ev.get("delta"), str):
            streams.setdefault((kind[0], str(ev.get(kind[1], ""))), []).append(i)
    out = list(events)
    for indexes in streams.values():
        pieces = [events[i]["delta"] for i in indexes]
        for i, piece, scrubbed in zip(indexes, pieces, secrets.scrub_pieces(pieces)):
            if scrubbed != piece:
                out[i] = {**events[i], "delta": scrubbed}
    return out


class AguiConnector(HttpBase):
    """AG-UI agents over SSE. A conversation is one thread: each turn a run on it with the messages
    so far."""

    name = "agui"
    settings_model = AguiSettings
    settings: AguiSettings

    def session_of(self, result: RunResult) -> dict[str, Any]:
        return {}  # the thread (the conversation's id) carries the conversation

    def default_body(self, request: AgentRequest) -> Any:
        s = self.settings
        messages = [{"id": f"msg_{request.run_id[:12]}", "role": "user", "content": request.prompt}]
        if request.turn:  # a turn of a conversation: the messages so far on one thread, this one last
            cid = request.conversation_id[:16]
            messages = [{"id": f"msg_{cid}_{i}", **m} for i, m in enumerate(request.messages)]
        context = [
            {"description": str(c.get("description", "")), "value": as_text(c.get("value", ""))}
            for c in request.context
        ]
        if s.context_as == "message" and context:
            text = "\n\n".join(f"{c['description'] or 'Context'}:\n{c['value']}" for c in context)
            messages.insert(0, {"id": f"ctx_{request.run_id[:12]}", "role": "user", "content": text})
            context = []
        forwarded = {**s.forwarded_props, **({"provisioned": dict(request.provisioned)} if request.provisioned else {})}
        if s.model:
            forwarded.setdefault("model", s.model)
        return {
            "threadId": s.thread_id or f"thread_{request.conversation_id[:16] or uuid.uuid4().hex[:16]}",
            # one run per turn on the thread, each with its own id
            "runId": request.run_id if request.turn <= 1 else f"{request.run_id}-{request.turn}",
            "messages": messages,
            "tools": list(s.tools),
            "context": context,
            "state": {**s.state, **(request.provisioned.get("state") or {})},
            "forwardedProps": forwarded,
            **s.body,
        }

    async def run(self, request: AgentRequest) -> RunResult:
        started = time.perf_counter()
        limit = self.run_timeout(request)
        budget = RunBudget.start(limit)
        fold = _Fold()
        try:
            async with asyncio.timeout(limit):
                response, retries, _ = await self.send(
                    request, self.build_body(request), accept=EVENT_STREAM, budget=budget
                )
                mime = media_type(response)
                if mime not in (EVENT_STREAM, ""):  # a JSON error, an HTML page: not an event stream
                    raise self.unexpected(response, await self._snippet(response), EVENT_STREAM)
                # From here on output has begun: no retries, only the idle and run timeouts apply.
                await self._consume(response, fold)
        except TimeoutError:
            open_parts = fold.open_parts()
            raise self.fail(
                budget.timed_out(f" after {len(fold.raw)} events") + (f" ({open_parts})" if open_parts else "")
            ) from None
        if fold.error:
            raise self.fail(fold.error)
        if fold.finished is None:
            if not fold.raw and fold.head.strip():  # bytes came, but no event: not an AG-UI stream
                raise self.unexpected(response, fold.head, f"{EVENT_STREAM} with AG-UI events")
            open_parts = fold.open_parts()
            raise self.fail(
                f"stream ended before RUN_FINISHED after {len(fold.raw)} events"
                + (f" ({open_parts})" if open_parts else "")
            )
        fold.finish()
        fold.raw = scrub_streams(fold.raw, known_secrets())
        output = fold.last_text
        result_value = fold.finished.get("result")
        if not output and result_value not in (None, ""):
            output = as_text(result_value)
        usage = fold.usage
        if isinstance(result_value, dict) and isinstance(result_value.get("usage"), dict):
            usage = usage_of(result_value["usage"], self.settings.model)
        if usage.model is None and self.settings.model:
            usage = usage.model_copy(update={"model": self.settings.model})
        if retries:
            usage = usage.model_copy(update={"retries": retries})
        result = self.run_result(
            request,
            output,
            fold.steps,
            usage=usage,
            raw_events=fold.raw,
            duration_ms=(time.perf_counter() - started) * 1000,
        )
        kinds = ", ".join(dict.fromkeys(str(ev.get("type")) for ev in fold.raw if isinstance(ev, dict)))
        silence = f"RUN_FINISHED came before any message, tool call or result (events: {kinds})"
        return await self.apply_after(list(fold.raw), result, silence=silence)

    async def _consume(self, response: httpx.Response, fold: _Fold) -> None:
        cap = self.settings.max_response_bytes
        size = 0

        async def lines() -> AsyncIterator[str]:
            nonlocal size
            splitter = LineSplitter()
            decoder = codecs.getincrementaldecoder("utf-8")("strict")
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > cap:
                    raise self.too_large()
                if len(fold.head) < 300:
                    fold.head += chunk[:300].decode("utf-8", "replace")
                try:
                    text = decoder.decode(chunk)
                except UnicodeDecodeError as exc:
                    raise self.fail(
                        f"event stream is not valid UTF-8: byte 0x{chunk[exc.start : exc.start + 1].hex()}"
                        f" after {size - len(chunk) + exc.start} bytes"
                    ) from None
                for line in splitter.feed(text):
                    yield line
            for line in splitter.close():
                yield line

        try:
            async for payload in sse_events(lines()):
                try:
                    event = json.loads(payload)
                except ValueError as exc:
                    raise self.fail(
                        f"malformed AG-UI event #{len(fold.raw) + 1}: {exc}; data {payload[:80]!r}"
                    ) from None
                if not isinstance(event, dict):
                    fold.raw.append(event)
                    continue
                fold.add(self.secrets.scrub(event) if self.secrets else event)
                if fold.error or fold.finished is not None:
                    break
        except httpx.TimeoutException:
            raise self.fail(
                f"no event for request_timeout_s={self.settings.request_timeout_s:g}s after {len(fold.raw)} events"
            ) from None
        except httpx.HTTPError as exc:
            if fold.error or fold.finished is not None:
                return
            open_parts = fold.open_parts()
            raise self.fail(
                f"stream cut off after {len(fold.raw)} events ({describe_transport_error(exc)})"
                + (f"; {open_parts}" if open_parts else "")
            ) from None
        finally:
            await close(response)
