"""pydantic validation errors as one line a user can act on: `field: message (got value)`."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

# pydantic's wording names Python types; these say what the file or setting should hold.
_MESSAGES = {
    "extra_forbidden": "unknown field (misspelt?)",
    "tuple_type": "expected a list (or a single value)",
    "list_type": "expected a list (or a single value)",
    "dict_type": "expected an object",
    "model_type": "expected an object (a mapping of fields)",
    "model_attributes_type": "expected an object (a mapping of fields)",
}
# Values under such names are never echoed back (a secret must not reach an error message).
_SENSITIVE = re.compile(r"secret|password|passwd|token|key|authorization|credential|auth", re.I)


def describe_errors(exc: ValidationError, prefix: str = "") -> str:
    """pydantic's errors as `field: message (got <value>)`, joined by '; '. Only short scalar
    values are shown, and none under a credential-like name."""
    parts = []
    for err in exc.errors():
        loc = err["loc"]
        where = prefix + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        msg = _MESSAGES.get(err["type"]) or str(err["msg"]).removeprefix("Value error, ")
        if not where and err["type"] == "value_error":  # a check of the whole object: its message says it all
            parts.append(msg)
            continue
        hidden = (
            err["type"] in ("missing", "extra_forbidden")
            or (err["type"] == "value_error" and isinstance(err.get("input"), dict))  # the message names the key
            or any(_SENSITIVE.search(str(p)) for p in loc)
        )
        parts.append(f"{where or 'value'}: {msg}" + ("" if hidden else _shown(err.get("input"))))
    return "; ".join(parts)


def _shown(value: Any) -> str:
    if isinstance(value, (dict, list, tuple, set)):
        return f" (got {'an object' if isinstance(value, dict) else 'a list'})"
    text = repr(value)
    return f" (got {text if len(text) <= 60 else text[:57] + '...'})"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """'; did you mean 'x'?' for the closest of `choices`, or '' when none is close."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.7)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_known_keys(given: Iterable[Any], known: Iterable[str], where: str = "", hint: str = "") -> None:
    """Raise ValueError naming the first key of `given` not in `known`, with the closest known one."""
    names = sorted(known)
    for key in given:
        if key not in names:
            raise ValueError(
                f"{where + ': ' if where else ''}unknown setting {str(key)!r}{did_you_mean(str(key), names)} "
                f"(known: {', '.join(names)}){hint}"
            )


class KnownKeys(BaseModel):
    """A settings model whose unknown keys are errors that name the closest known key
    (`timout_s` -> "did you mean 'timeout_s'?") instead of being dropped silently."""

    model_config = ConfigDict(extra="forbid")
    settings_name: ClassVar[str] = ""  # how the message names this object when nothing else does
    settings_hint: ClassVar[str] = ""  # said after the known keys

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            known = {n for n, f in cls.model_fields.items() if not f.exclude} | {
                f.alias for f in cls.model_fields.values() if f.alias
            }
            check_known_keys(value, known, cls.settings_name, cls.settings_hint)
        return value
