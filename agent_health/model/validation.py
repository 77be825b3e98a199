"""pydantic validation errors as one line a user can act on: `field: message (got value)`."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

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
        hidden = err["type"] in ("missing", "extra_forbidden") or any(_SENSITIVE.search(str(p)) for p in loc)
        parts.append(f"{where or 'value'}: {msg}" + ("" if hidden else _shown(err.get("input"))))
    return "; ".join(parts)


def _shown(value: Any) -> str:
    if isinstance(value, (dict, list, tuple, set)):
        return f" (got {'an object' if isinstance(value, dict) else 'a list'})"
    text = repr(value)
    return f" (got {text if len(text) <= 60 else text[:57] + '...'})"
