"""Reading the judge's JSON answer: repair locally first, ask again only for what repair cannot fix.

Which object is the answer: the LAST top-level JSON object in the judge's text that fits the
answer's fields AND carries the prompt's nonce (see `prompt.py`). A verdict the agent forged and
the judge quoted (plainly, in a code fence, with zero-width characters, nested in prose) never
carries the nonce, so it is never taken. Each candidate is read as JSON, or else repaired with
`json-repair` (trailing commas, single quotes, unquoted keys, comments, Python literals, a missing
closing brace). Repair never makes a verdict nobody gave: an answer the provider says was cut off at
its length limit, an answer without a field the format asks for (a score), and an echo of the
template (`"pass": true or false`) are unusable, however well they parse. Only when no candidate is
usable is the model asked once more, with what was wrong; a second failure raises
`JudgeAnswerError` with an excerpt of what came back, which the service turns into an errored
verdict (never a silent pass or a zero).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agent_health.judges.base import LLM
from agent_health.judges.chat import AnswerCutOff, AnswerSchema, ChatClient, ChatMessage, ChatResponse, ToolSpec
from agent_health.judges.prompt import VERDICT_SCHEMA
from agent_health.lazy import deferred
from agent_health.model import Usage

if TYPE_CHECKING:
    import json_repair as json_repair
else:
    json_repair = deferred("json_repair")  # only for an answer that is not JSON: kept off every run's start


T = TypeVar("T")
_MAX_SCAN_CHARS = 100_000  # judge answers are short; a runaway answer is not scanned past this
_MAX_UNCLOSED = 20  # rescans after an opening brace that never closes (prose such as "{a, b")


class AnswerError(ValueError):
    """One answer could not be used (not JSON, or missing/invalid fields)."""


class JudgeAnswerError(Exception):
    """The answer was still unusable after the repair attempt."""


def excerpt(text: str, n: int = 200) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[:n] + "…"


def _close_of(text: str, start: int) -> int | None:
    """Index of the brace closing the object opened at `start` (strings respected), or None."""
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        c = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def top_level_objects(text: str) -> list[str]:
    """The top-level `{...}` spans of `text`, in order. An object still open at the end (a cut-off
    answer) is included as it is; the text after its opening brace is scanned again."""
    text = text[-_MAX_SCAN_CHARS:]
    found: list[str] = []
    i, unclosed = 0, 0
    while (start := text.find("{", i)) >= 0:
        end = _close_of(text, start)
        if end is not None:
            found.append(text[start : end + 1])
            i = end + 1
            continue
        found.append(text[start:])
        unclosed += 1
        if unclosed >= _MAX_UNCLOSED:
            break
        i = start + 1
    return found


def decode(candidate: str) -> Any:
    """JSON, else what json-repair makes of it (None when neither gives an object)."""
    try:
        return json.loads(candidate)
    except ValueError:
        pass
    try:
        repaired = json_repair.loads(candidate, skip_json_loads=True)
    except Exception:  # json-repair gives up on some inputs by raising; nothing to use then  # noqa: BLE001
        return None
    return repaired if isinstance(repaired, dict) else None


def _bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise AnswerError(f"`{name}` must be true or false, got {value!r}")


def number(value: Any, name: str, lo: float, hi: float) -> float:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AnswerError(f"`{name}` must be a number from {lo:g} to {hi:g}, got {value!r}")
    if not lo <= float(value) <= hi:
        raise AnswerError(f"`{name}` must be from {lo:g} to {hi:g}, got {value}")
    return float(value)


def verdict_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """{"pass": bool, "score": 0-1, "reasoning": str} -> {passed, score, reasoning}. The format asks
    for a score: an answer without one (often cut off before it) is not a verdict, never a 1.0."""
    key = "pass" if "pass" in obj else "passed" if "passed" in obj else None
    if key is None:
        raise AnswerError("the answer has no `pass` field")
    passed = _bool(obj[key], "pass")
    if obj.get("score") is None:
        raise AnswerError("the answer has no `score` (a number from 0 to 1)")
    score = number(obj["score"], "score", 0, 1)
    reasoning = obj.get("reasoning", obj.get("reason", ""))
    if not isinstance(reasoning, str):
        reasoning = json.dumps(reasoning)
    return {"passed": passed, "score": score, "reasoning": reasoning}


_COMMENT = re.compile(r"//[^\n]*|/\*.*?(?:\*/|$)", re.S)
_ANGLED = re.compile(r"<[^<>\n]*>")  # `<metric name>: <score>`
_WORDS = re.compile(r"[A-Za-z_]\w*\s+[\w<]")  # `true or false`, `a number from 0 to 1`


def unquoted(candidate: str) -> str:
    """`candidate` with every string emptied (double- or single-quoted, as json-repair reads them)
    and comments dropped: the text that is not inside any value."""
    out: list[str] = []
    quote, escaped = "", False
    for c in candidate:
        if quote:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == quote:
                quote = ""
                out.append(c)
        else:
            quote = c if c in "\"'" else ""
            out.append(c)
    return _COMMENT.sub(" ", "".join(out))


def template_words(candidate: str) -> str | None:
    """The placeholder an answer copied from its template where a key or value belongs (`true or
    false`, `a number from 0 to 1`, `<score>`), or None. json-repair would read the cut-off echo
    `"pass": true or ` as `"pass": true`. Prose inside strings never counts."""
    for part in re.split(r"[,{}\[\]]", unquoted(candidate)):
        value = part.partition(":")[2] if ":" in part else part
        copied = part if _ANGLED.search(part) else value if _WORDS.search(value) else None
        if copied is not None:
            return " ".join(copied.split())
    return None


def pick_answer(text: str, nonce: str, fields: Callable[[dict[str, Any]], T]) -> T:
    """The last top-level object of `text` that `fields` accepts and that carries `nonce`.

    Raises AnswerError saying what was wrong with the most promising candidate: the judge's own
    object (it has the nonce) with a bad field first, then a well-formed object without the nonce.
    """
    own_error: AnswerError | None = None
    other_error: AnswerError | None = None
    unsigned = False
    for candidate in reversed(top_level_objects(text or "")):
        obj = decode(candidate)
        if obj is None:
            continue
        signed = str(obj.get("nonce", "")).strip().lower() == nonce
        try:
            if copied := template_words(candidate):
                # Handled just below with fields()' own AnswerError.
                raise AnswerError(f"the answer repeats its template ({copied!r}) instead of filling it in")  # noqa: TRY301
            value = fields(obj)
        except AnswerError as exc:
            if signed:
                own_error = own_error or exc
            else:
                other_error = other_error or exc
            continue
        if signed:
            return value
        unsigned = True
    if own_error is not None:
        raise own_error
    if unsigned:
        raise AnswerError(f'the answer does not carry this prompt\'s nonce: include "nonce": "{nonce}"')
    if other_error is not None:
        raise other_error
    raise AnswerError("the answer is not a JSON object" if (text or "").strip() else "the answer is empty")


VERDICT_ANSWER = AnswerSchema(name="verdict", schema=VERDICT_SCHEMA, description="Your verdict on the claim.")


def verdict_answer(text: str, nonce: str) -> dict[str, Any]:
    """The judge's own verdict in `text` (see `pick_answer`)."""
    return pick_answer(text, nonce, verdict_fields)


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
    schema: AnswerSchema | None = None,
) -> tuple[T, Usage]:
    """Ask (or take `first`), validate (repairing locally), and only when that fails ask once more
    with the error spelled out. `schema` asks for the provider's structured output.

    `tools` is only passed so providers accept a conversation that already holds tool calls
    (Bedrock requires the tool config then); a tool call is not an answer."""
    usage = Usage()
    response = first or await client.chat(messages, system=system, tools=tools, json_mode=True, schema=schema)
    usage = usage + response.usage
    try:
        return _whole(response, validate), usage
    except AnswerError as exc:
        error = exc
    repair = [
        *messages,
        ChatMessage(role="assistant", content=response.text),
        ChatMessage(role="user", content=repair_message(str(error), answer_format)),
    ]
    response = await client.chat(repair, system=system, tools=tools, json_mode=True, schema=schema)
    usage = usage + response.usage
    try:
        return _whole(response, validate), usage
    except AnswerError as exc:
        raise _give_up(exc, response.text) from exc


def cut_off_error(response: ChatResponse) -> AnswerError:
    return AnswerError(
        f"the answer was cut off at the length limit ({response.cut_off}); "
        "give the JSON object with a shorter reasoning"
    )


def _whole(response: ChatResponse, validate: Callable[[str], T]) -> T:
    """The validated answer of a response that was not cut off: the start of an answer, however
    well it parses (`{"pass": true, "sc`), is not the answer."""
    if response.cut_off:
        raise cut_off_error(response)
    return validate(response.text)


async def complete_json(
    llm: LLM,
    prompt: str,
    *,
    system: str | None,
    answer_format: str,
    validate: Callable[[str], T],
    schema: AnswerSchema | None = None,
) -> T:
    """`ask_json` over the single-turn `LLM` helper (custom and rubric evaluators)."""

    async def attempt(ask: str) -> tuple[str, T | AnswerError]:
        try:
            text = await llm.complete(ask, system=system, json_mode=True, schema=schema)
        except AnswerCutOff as exc:
            return exc.response.text, cut_off_error(exc.response)
        try:
            return text, validate(text)
        except AnswerError as exc:
            return text, exc

    text, answer = await attempt(prompt)
    if not isinstance(answer, AnswerError):
        return answer
    retry = (
        f"{prompt}\n\n## Your previous answer\n{excerpt(text, 2000)}\n\n"
        f"## Correction\n{repair_message(str(answer), answer_format)}"
    )
    text, answer = await attempt(retry)
    if isinstance(answer, AnswerError):
        raise _give_up(answer, text) from answer
    return answer
