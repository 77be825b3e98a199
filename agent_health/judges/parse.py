"""Reading the judge's JSON answer, with exactly one repair attempt.

A malformed answer is sent back once with what was wrong; a second failure raises
`JudgeAnswerError` carrying an excerpt of what came back, which the service turns into an errored
verdict (never a silent pass or a zero).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from agent_health.judges.base import LLM
from agent_health.judges.chat import ChatClient, ChatMessage, ChatResponse, ToolSpec
from agent_health.model import Usage

T = TypeVar("T")
_FENCED = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)


class AnswerError(ValueError):
    """One answer could not be used (not JSON, or missing/invalid fields)."""


class JudgeAnswerError(Exception):
    """The answer was still unusable after the repair attempt."""


def excerpt(text: str, n: int = 200) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[:n] + "…"


def extract_json(text: str) -> Any:
    """The JSON object in `text`: the whole text, a ```json block, or the outermost {...}."""
    text = (text or "").strip()
    candidates = [text, *(m.group(1).strip() for m in _FENCED.finditer(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for c in candidates:
        try:
            return json.loads(c)
        except ValueError:
            continue
    raise AnswerError("the answer is not a JSON object" if text else "the answer is empty")


def _bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise AnswerError(f"`{name}` must be true or false, got {value!r}")


def number(value: Any, name: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AnswerError(f"`{name}` must be a number from {lo:g} to {hi:g}, got {value!r}")
    if not lo <= float(value) <= hi:
        raise AnswerError(f"`{name}` must be from {lo:g} to {hi:g}, got {value}")
    return float(value)


def verdict_answer(text: str) -> dict[str, Any]:
    """{"pass": bool, "score": 0-1, "reasoning": str} -> {passed, score, reasoning}."""
    obj = extract_json(text)
    if not isinstance(obj, dict):
        raise AnswerError("the answer must be a JSON object")
    key = "pass" if "pass" in obj else "passed" if "passed" in obj else None
    if key is None:
        raise AnswerError("the answer has no `pass` field")
    passed = _bool(obj[key], "pass")
    score = number(obj["score"], "score", 0, 1) if obj.get("score") is not None else (1.0 if passed else 0.0)
    reasoning = obj.get("reasoning", obj.get("reason", ""))
    if not isinstance(reasoning, str):
        reasoning = json.dumps(reasoning)
    return {"passed": passed, "score": score, "reasoning": reasoning}


def repair_message(error: str, answer_format: str) -> str:
    return (
        f"Your previous answer could not be used: {error}. Answer again with ONLY the JSON object, "
        f"no prose and no code fences.\n{answer_format}"
    )


def _give_up(error: Exception, text: str) -> JudgeAnswerError:
    return JudgeAnswerError(f"judge answer unusable after one repair attempt ({error}); got: {excerpt(text)!r}")


async def ask_json(
    client: ChatClient,
    messages: list[ChatMessage],
    *,
    system: str,
    answer_format: str,
    validate: Callable[[str], T],
    first: ChatResponse | None = None,
    tools: tuple[ToolSpec, ...] = (),
) -> tuple[T, Usage]:
    """Ask (or take `first`), validate, and on failure ask once more with the error spelled out.

    `tools` is only passed so providers accept a conversation that already holds tool calls
    (Bedrock requires the tool config then); a tool call is not an answer."""
    usage = Usage()
    response = first or await client.chat(messages, system=system, tools=tools, json_mode=True)
    usage = usage + response.usage
    try:
        return validate(response.text), usage
    except AnswerError as exc:
        error = exc
    repair = [
        *messages,
        ChatMessage(role="assistant", content=response.text),
        ChatMessage(role="user", content=repair_message(str(error), answer_format)),
    ]
    response = await client.chat(repair, system=system, tools=tools, json_mode=True)
    usage = usage + response.usage
    try:
        return validate(response.text), usage
    except AnswerError as exc:
        raise _give_up(exc, response.text) from exc


async def complete_json(
    llm: LLM, prompt: str, *, system: str | None, answer_format: str, validate: Callable[[str], T]
) -> T:
    """`ask_json` over the single-turn `LLM` helper (custom and rubric evaluators)."""
    text = await llm.complete(prompt, system=system, json_mode=True)
    try:
        return validate(text)
    except AnswerError as exc:
        error = exc
    retry = (
        f"{prompt}\n\n## Your previous answer\n{excerpt(text, 2000)}\n\n"
        f"## Correction\n{repair_message(str(error), answer_format)}"
    )
    text = await llm.complete(retry, system=system, json_mode=True)
    try:
        return validate(text)
    except AnswerError as exc:
        raise _give_up(exc, text) from exc
