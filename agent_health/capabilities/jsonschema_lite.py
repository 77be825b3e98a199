"""A small JSON Schema validator for `to_match_schema` (type, properties, required, items, enum,
const, min/max, minLength/maxLength, minItems/maxItems, additionalProperties, anyOf/oneOf/allOf).
Uses the `jsonschema` package instead when it is installed."""

from __future__ import annotations

from typing import Any

_TYPES = {
    "object": dict,
    "array": (list, tuple),
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    expected: Any = _TYPES.get(name, object)
    return isinstance(value, expected)


def validate(schema: dict[str, Any], data: Any) -> str | None:
    """None when valid, else the first problem found, with its path."""
    try:
        import jsonschema
    except ImportError:
        return _check(schema, data, "$")
    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
    return None if err is None else f"{'.'.join(['$', *map(str, err.absolute_path)])}: {err.message}"


def _check(s: dict[str, Any], v: Any, path: str) -> str | None:
    t = s.get("type")
    if t is not None:
        names = t if isinstance(t, list) else [t]
        if not any(_is_type(v, n) for n in names):
            return f"{path}: expected {t}, got {type(v).__name__}"
    if "enum" in s and v not in s["enum"]:
        return f"{path}: {v!r} not in {s['enum']}"
    if "const" in s and v != s["const"]:
        return f"{path}: {v!r} != {s['const']!r}"
    for key, fn in (("allOf", all), ("anyOf", any)):
        if key in s and not fn(_check(sub, v, path) is None for sub in s[key]):
            return f"{path}: does not match {key}"
    if "oneOf" in s and sum(_check(sub, v, path) is None for sub in s["oneOf"]) != 1:
        return f"{path}: does not match exactly one of oneOf"
    if isinstance(v, dict):
        for req in s.get("required", []):
            if req not in v:
                return f"{path}: missing required property {req!r}"
        props = s.get("properties", {})
        for k, sub in props.items():
            if k in v and (p := _check(sub, v[k], f"{path}.{k}")):
                return p
        extra = s.get("additionalProperties", True)
        for k in v:
            if k not in props:
                if extra is False:
                    return f"{path}: unexpected property {k!r}"
                if isinstance(extra, dict) and (p := _check(extra, v[k], f"{path}.{k}")):
                    return p
    if isinstance(v, (list, tuple)):
        if "minItems" in s and len(v) < s["minItems"]:
            return f"{path}: fewer than {s['minItems']} items"
        if "maxItems" in s and len(v) > s["maxItems"]:
            return f"{path}: more than {s['maxItems']} items"
        if isinstance(s.get("items"), dict):
            for i, item in enumerate(v):
                if p := _check(s["items"], item, f"{path}[{i}]"):
                    return p
    if isinstance(v, str):
        if "minLength" in s and len(v) < s["minLength"]:
            return f"{path}: shorter than {s['minLength']}"
        if "maxLength" in s and len(v) > s["maxLength"]:
            return f"{path}: longer than {s['maxLength']}"
    if _is_type(v, "number"):
        if "minimum" in s and v < s["minimum"]:
            return f"{path}: {v} < minimum {s['minimum']}"
        if "maximum" in s and v > s["maximum"]:
            return f"{path}: {v} > maximum {s['maximum']}"
    return None
