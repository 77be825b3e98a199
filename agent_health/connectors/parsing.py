"""Turning an agent's response body into output, trajectory and usage.

Recognized shapes (first match wins), unless `paths` points at the fields:

- OpenAI chat completions: `choices[0].message.content`, `.tool_calls`, `.reasoning_content`,
  `usage.prompt_tokens/completion_tokens`, `model`;
- common agent shapes: the answer in `response` / `content` / `answer` / `text` / `message` /
  `output` / `result`; tool calls in `toolCalls` / `tool_calls` (name, args or arguments, id,
  optional result); `thinking` / `reasoning`; `trajectory` / `steps` as step objects; `usage`;
- a JSON string or a plain-text body is the answer itself.

Files the agent produced may be listed under `artifacts` (see `artifacts_of`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import mimetypes
from collections.abc import Mapping
from typing import Any

from agent_health.model import Artifact, Step, Usage
from agent_health.model.copies import built
from agent_health.model.run import Role

OUTPUT_KEYS = ("response", "content", "answer", "text", "message", "output", "result", "final_answer")
TOOL_KEYS = ("toolCalls", "tool_calls", "tools_called")
THINKING_KEYS = ("thinking", "reasoning", "reasoning_content")
STEP_KEYS = ("trajectory", "steps")
_KNOWN_KEYS = frozenset((*OUTPUT_KEYS, *TOOL_KEYS, *THINKING_KEYS, *STEP_KEYS))


NO_USAGE = Usage(unreported=True)  # frozen: the one usage of every answer that reports none
# `isinstance(x, (dict, Mapping))` below: a dict is answered at once, where the ABC alone goes
# through abc's Python-level `__instancecheck__` (several checks per answer parsed).


class ParseError(ValueError):
    """The response has no usable answer at a configured path."""


def get_path(data: Any, path: str) -> Any:
    """Value at a dotted path (`choices.0.message.content`); raises KeyError when absent."""
    cur = data
    for part in path.split("."):
        if isinstance(cur, (dict, Mapping)) and part in cur:
            cur = cur[part]
        elif isinstance(cur, (list, tuple)) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            raise KeyError(path)
    return cur


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, Mapping)) and isinstance(content := value.get("content"), str):  # {"role", "content"}
        return content
    if isinstance(value, list) and all(isinstance(p, (dict, Mapping)) for p in value):  # content parts
        texts = [str(p.get("text", "")) for p in value if p.get("type", "text") in ("text", "output_text")]
        if texts:
            return "".join(texts)
    return json.dumps(value, ensure_ascii=False, default=str)


def parse_args(value: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict; JSON strings are decoded, anything else is kept under `_raw`."""
    if value is None:
        return {}
    if isinstance(value, (dict, Mapping)):
        return dict(value)
    if isinstance(value, str):
        try:
            decoded = json.loads(value) if value.strip() else {}
        except ValueError:
            return {"_raw": value}
        return decoded if isinstance(decoded, dict) else {"_value": decoded}
    return {"_value": value}


_TOKEN_KEYS = (
    "input_tokens", "prompt_tokens", "inputTokens", "promptTokens", "output_tokens", "completion_tokens",
    "outputTokens", "completionTokens", "total_tokens", "totalTokens",
)  # fmt: skip


def usage_of(data: Any, model: str | None = None) -> Usage:
    """The usage an agent reported in `data` (its `usage` object); with no token count in it at
    all (no object, or one without a count), the usage is unreported: unknown, not zero."""
    if not isinstance(data, (dict, Mapping)):
        return Usage(model=model, unreported=True) if model is not None else NO_USAGE

    def first(*keys: str) -> int:
        for k in keys:
            if isinstance(data.get(k), (int, float)):
                return int(data[k])
        return 0

    inp = first("input_tokens", "prompt_tokens", "inputTokens", "promptTokens")
    out = first("output_tokens", "completion_tokens", "outputTokens", "completionTokens")
    total = first("total_tokens", "totalTokens") or inp + out
    counted = any(isinstance(data.get(k), (int, float)) for k in _TOKEN_KEYS)
    return Usage(
        unreported=not counted,
        input_tokens=inp,
        output_tokens=out,
        total_tokens=total,
        model=data.get("model") or model,
        llm_calls=first("llm_calls", "llmCalls"),
    )


def tool_steps(calls: Any) -> list[Step]:
    """Steps for a list of tool calls in OpenAI, Anthropic-like or flat form, results included."""
    steps: list[Step] = []
    if not isinstance(calls, (list, tuple)):
        return steps
    for i, call in enumerate(calls):
        if not isinstance(call, (dict, Mapping)):
            continue
        fn: Mapping[str, Any] = call["function"] if isinstance(call.get("function"), (dict, Mapping)) else call
        name = fn.get("name") or call.get("tool") or call.get("toolName") or call.get("tool_name")
        args = fn.get("arguments", fn.get("args", fn.get("input", call.get("parameters"))))
        cid = str(call.get("id") or call.get("call_id") or call.get("toolCallId") or f"call_{i}")
        arguments = parse_args(args)
        fields = {"kind": "tool_call", "role": "assistant", "tool": str(name) if name else None, "args": arguments}
        fields["call_id"] = cid
        # text keys (nearly always): the step is what validating it would make; other keys are validated
        steps.append(built(Step, fields) if all(type(k) is str for k in arguments) else Step(**fields))
        for key in ("result", "output", "response"):
            if key in call:
                steps.append(
                    Step(
                        kind="tool_result",
                        tool=str(name) if name else None,
                        call_id=cid,
                        content=as_text(call[key]),
                        is_error=bool(call.get("is_error") or call.get("isError") or call.get("error")),
                    )
                )
                break
    return steps


# Roles as agents name them -> the trajectory's: developer (OpenAI, AG-UI) speaks as the system does.
ROLE_ALIASES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}


def role_of(value: Any) -> Role | None:
    """The trajectory role an agent's role name stands for; None when unknown (the kind decides)."""
    return ROLE_ALIASES.get(value.lower()) if isinstance(value, str) else None


def explicit_steps(items: Any) -> list[Step]:
    out: list[Step] = []
    for item in items if isinstance(items, (list, tuple)) else ():
        if not isinstance(item, (dict, Mapping)):
            continue
        kind = item.get("kind") or item.get("type")
        if kind in ("tool_use", "function_call"):
            kind = "tool_call"
        if kind not in ("message", "thinking", "tool_call", "tool_result"):
            continue
        out.append(
            Step(
                kind=kind,
                role=role_of(item.get("role")),
                content=as_text(item.get("content", item.get("text", ""))),
                tool=item.get("tool") or item.get("name"),
                args=parse_args(item.get("args", item.get("arguments"))) if kind == "tool_call" else None,
                call_id=item.get("call_id") or item.get("callId") or item.get("id"),
                is_error=bool(item.get("is_error", False)),
            )
        )
    return out


def _thinking_steps(value: Any) -> list[Step]:
    if not value:
        return []
    items = value if isinstance(value, list) else [value]
    return [Step(kind="thinking", content=as_text(v)) for v in items]


def parse_body(
    data: Any, paths: Mapping[str, str] | None = None, model: str | None = None
) -> tuple[str, list[Step], Usage]:
    """(output, trajectory, usage) from a decoded response body."""
    if paths:
        return _parse_paths(data, paths, model)
    if isinstance(data, str):
        return data, [Step(kind="message", content=data)], Usage(model=model, unreported=True)
    if not isinstance(data, (dict, Mapping)):
        text = as_text(data)
        return text, [Step(kind="message", content=text)], Usage(model=model, unreported=True)
    if isinstance(data.get("choices"), list) and data["choices"]:  # OpenAI chat completion
        choice = data["choices"][0]
        msg = choice.get("message") or choice.get("delta") or {}
        steps = _thinking_steps(msg.get("reasoning_content") or msg.get("reasoning"))
        steps += tool_steps(msg.get("tool_calls"))
        text = as_text(msg.get("content"))
        if text:
            steps.append(Step(kind="message", content=text))
        usage = usage_of(data.get("usage"), data.get("model") or model)
        if not usage.llm_calls:
            usage = usage.model_copy(update={"llm_calls": 1})
        return text, steps, usage
    # the keys looked for that the answer has, found at once: an answer has a few of the 16 (a
    # large one is looked up 16 times instead of walked)
    known = _KNOWN_KEYS.intersection(data) if len(data) <= len(_KNOWN_KEYS) else data.keys() & _KNOWN_KEYS
    steps = []
    if not known.isdisjoint(STEP_KEYS):
        for k in STEP_KEYS:
            if isinstance(data.get(k), list):
                steps = explicit_steps(data[k])
                break
    if not steps:
        if not known.isdisjoint(THINKING_KEYS):
            for k in THINKING_KEYS:
                steps += _thinking_steps(data.get(k))
        if not known.isdisjoint(TOOL_KEYS):
            for k in TOOL_KEYS:
                if k in data:
                    steps += tool_steps(data[k])
                    break
    text = ""
    for k in OUTPUT_KEYS if not known.isdisjoint(OUTPUT_KEYS) else ():
        if data.get(k) not in (None, ""):
            text = as_text(data[k])
            break
    if text and not (steps and steps[-1].kind == "message" and steps[-1].content == text):
        steps.append(built(Step, {"kind": "message", "role": "assistant", "content": text}))  # a text: valid
    return text, steps, usage_of(data.get("usage"), data.get("model") or model)


def _parse_paths(data: Any, paths: Mapping[str, str], model: str | None) -> tuple[str, list[Step], Usage]:
    def at(name: str) -> Any:
        if name not in paths:
            return None
        try:
            return get_path(data, paths[name])
        except KeyError:
            if name == "output":
                raise ParseError(f"response has no value at output path {paths[name]!r}") from None
            return None

    steps = _thinking_steps(at("thinking")) + tool_steps(at("tool_calls")) + explicit_steps(at("trajectory"))
    text = as_text(at("output"))
    if text:
        steps.append(Step(kind="message", content=text))
    return text, steps, usage_of(at("usage"), model)


def artifacts_of(data: Any) -> tuple[Artifact, ...]:
    """The files an agent's JSON answer lists under `artifacts`: each `{name, media_type, size,
    content}` (text), `{..., data}` (base64) or `{..., url}` (a reference to where it lives).
    A malformed entry is a ParseError naming its index and what is wrong."""
    items = data.get("artifacts") if isinstance(data, (dict, Mapping)) else None
    if items is None:
        return ()
    if not isinstance(items, list):
        raise ParseError(f"artifacts: expected a list of files, got {type(items).__name__}")
    found: list[Artifact] = []
    for n, item in enumerate(items):
        if not isinstance(item, (dict, Mapping)) or not isinstance(item.get("name"), str) or not item["name"]:
            raise ParseError(f"artifacts[{n}]: expected an object with a name, got {str(item)[:80]!r}")
        media = item.get("media_type") or item.get("mediaType") or item.get("mime_type")
        text, b64 = item.get("content"), item.get("data")
        if text is not None and not isinstance(text, str):
            raise ParseError(f"artifacts[{n}] ({item['name']}): content must be text (binary goes in data, base64)")
        try:
            raw = base64.b64decode(b64, validate=True) if b64 is not None else None
        except (ValueError, TypeError):
            raise ParseError(f"artifacts[{n}] ({item['name']}): data is not valid base64") from None
        body = text.encode() if text is not None else raw
        size = item.get("size")
        try:
            found.append(
                Artifact(
                    name=item["name"],
                    media_type=media or mimetypes.guess_type(item["name"])[0] or "application/octet-stream",
                    size=len(body) if body is not None else size or 0,
                    sha256=hashlib.sha256(body).hexdigest() if body is not None else None,
                    content=text if text is not None else b64,
                    encoding="utf-8" if text is not None else "base64" if b64 is not None else None,
                    uri=item.get("url") or item.get("uri"),
                )
            )
        except ValueError as exc:
            raise ParseError(f"artifacts[{n}] ({item['name']}): {exc}") from None
    return tuple(found)
