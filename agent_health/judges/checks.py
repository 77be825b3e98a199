"""Deterministic checks shared by `expect` matchers and the built-in judges: a JSON Schema or
pydantic-model check with JSON paths, and the subset match of tool arguments."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pydantic

from agent_health.lazy import deferred

# jsonschema loads for the first JSON-schema check (a pydantic model needs none)
if TYPE_CHECKING:
    import jsonschema as jsonschema
    import referencing.exceptions as referencing_exceptions
else:
    jsonschema = deferred("jsonschema")
    referencing_exceptions = deferred("referencing.exceptions")


def subset(expected: Any, actual: Any) -> bool:
    """Expected args match when every expected key is present with a matching value."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and subset(v, actual[k]) for k, v in expected.items())
    return bool(expected == actual)  # user values: __eq__ may return anything


def json_path(parts: Iterable[Any]) -> str:
    """`$.items[0].name` from a sequence of keys and indexes (pydantic `loc`, jsonschema `path`)."""
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def schema_problem(schema: Any, data: Any, max_errors: int = 5, *, what: str = "to_match_schema()") -> str | None:
    """None when `data` fits a pydantic model class or a JSON schema; else every problem with its JSON path.

    An invalid JSON schema (a typo such as `"type": "strng"`) or a `$ref` that cannot be resolved
    raises ValueError naming the problem: a broken schema must not pass silently.
    """
    if data is None:
        return "output is not JSON"
    if isinstance(schema, type) and hasattr(schema, "model_validate"):
        try:
            schema.model_validate(data)
        except pydantic.ValidationError as exc:
            details = "; ".join(f"{json_path(e['loc'])}: {e['msg']}" for e in exc.errors()[:max_errors])
            return str(exc).splitlines()[0] + ": " + details
        else:
            return None
    if not isinstance(schema, (dict, bool)):
        raise TypeError(f"{what} needs a pydantic model class or a JSON schema (dict), got {type(schema).__name__}")
    validator_class = jsonschema.validators.validator_for(schema)  # the $schema's draft; the latest by default
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"{what}: invalid JSON schema at {exc.json_path}: {exc.message}") from None
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    try:
        errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    except referencing_exceptions.Unresolvable as exc:
        raise ValueError(f"{what}: the schema's reference cannot be resolved: {exc}") from None
    if not errors:
        return None
    shown = "; ".join(f"{e.json_path}: {e.message}" for e in errors[:max_errors])
    return shown + (f" (and {len(errors) - max_errors} more)" if len(errors) > max_errors else "")


__all__ = ["json_path", "schema_problem", "subset"]
