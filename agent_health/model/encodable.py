"""Text that cannot be written as UTF-8: a lone surrogate. JSON's `"\\ud800"` is a valid escape
that decodes to one, so an agent, a judge or an exception message can hand one over; serializing
a model that holds it fails (pydantic's `model_dump_json`, any UTF-8 file). Where a result, a
manifest or a report is written, a model that fails so is written again as `encodable(model)`:
each lone surrogate becomes the visible escape `\\ud800` (as the JUnit and terminal reporters
show it), and everything else stays as it was."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    """`text` with each lone surrogate written as `\\udXXX` (six ASCII characters)."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _clean(value: Any) -> tuple[Any, bool]:
    if isinstance(value, str):
        if _SURROGATE.search(value):
            return escape_surrogates(value), True
        return value, False
    if isinstance(value, dict):
        out, changed = {}, False
        for k, v in value.items():
            ck, kc = _clean(k)
            cv, vc = _clean(v)
            out[ck] = cv
            changed |= kc or vc
        return (out, True) if changed else (value, False)
    if isinstance(value, (list, tuple)):
        items = [_clean(v) for v in value]
        if any(c for _, c in items):
            return type(value)(v for v, _ in items), True
        return value, False
    return value, False


def encodable(model: M) -> M:
    """`model` itself when it holds no lone surrogate, else a copy with each one escaped."""
    data, changed = _clean(model.model_dump())
    return type(model).model_validate(data) if changed else model
