"""JSON as eval files need it: every problem is an `EvalFileError` naming the file and the line,
including the two that `json.loads` lets through or reports without a line: an object with the
same key twice (json keeps the last value silently) and an integer past Python's 4,300-digit
conversion limit (a bare ValueError)."""

from __future__ import annotations

import json
import re
from typing import Any

from agent_health.errors import EvalFileError

LONG_NUMBER = "a number with more than 4,300 digits (Python reads no longer integers)"
_LONG_DIGITS = re.compile(r"\d{4301,}")


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict; _DuplicateKey (a ValueError) when a key comes twice."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


_TOKEN = re.compile(r'("(?:[^"\\]|\\.)*")(\s*:)?|[{}]')  # strings (keys when a colon follows), braces


def duplicate_key_line(text: str, key: str) -> int | None:
    """The line where `key` appears a second time in one object (a scan of the object's keys,
    run only once the decoder found a duplicate)."""
    objects: list[set[str]] = []
    for token in _TOKEN.finditer(text):
        mark = token.group()
        if mark == "{":
            objects.append(set())
        elif mark == "}":
            if objects:
                objects.pop()
        elif objects and token.group(2):
            name = json.loads(token.group(1))
            if name in objects[-1] and name == key:
                return text.count("\n", 0, token.start()) + 1
            objects[-1].add(name)
    return None


def long_number_line(text: str) -> int | None:
    """The line of the first integer too long for Python, if any."""
    match = _LONG_DIGITS.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def read_json(text: str, rel: str, line_offset: int = 0) -> Any:
    """The JSON document in `text` (of the file `rel`, whose first line is `line_offset` + 1)."""

    def fail(message: str, line: int | None) -> EvalFileError:
        return EvalFileError(rel, message, (line or 1) + line_offset if line or line_offset else None)

    try:
        return json.loads(text, object_pairs_hook=unique_object)
    except _DuplicateKey as exc:
        message = f"duplicate key {exc.key!r} in one object (JSON would keep only its last value)"
        raise fail(message, duplicate_key_line(text, exc.key)) from None
    except RecursionError:
        raise fail("invalid JSON: nested too deeply", None) from None
    except json.JSONDecodeError as exc:
        raise fail(f"invalid JSON: {exc.msg} (column {exc.colno})", exc.lineno) from None
    except ValueError:
        raise fail(f"invalid JSON: {LONG_NUMBER}", long_number_line(text)) from None
