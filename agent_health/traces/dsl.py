"""Guarding the trace-query tool's `query(dsl)`: search bodies only, no scripts, nothing that reads
outside the run, and a small evaluator of the same DSL for the local span store."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from agent_health.errors import InfrastructureError


class QueryRejected(InfrastructureError):
    """A trace query asked for something the run-scoped, read-only tool does not allow."""


ALLOWED_TOP = {"query", "size", "from", "sort", "_source", "track_total_hits"}
# Keys that run code, escape the query's filter (global aggregations, lookups into other
# documents or indices) or have no place in a read: rejected wherever they appear.
FORBIDDEN = {
    "script",
    "scripts",
    "script_score",
    "script_fields",
    "scripted_metric",
    "runtime_mappings",
    "global",
    "index",
    "_index",
    "indices",
    "percolate",
    "more_like_this",
    "terms_set",
    "stored_fields",
    "docvalue_fields",
    "pit",
    "scroll",
    "update",
    "delete",
    "upsert",
    "doc",
    "_bulk",
    "_update",
    "_delete_by_query",
    "_update_by_query",
    "painless",
    "lang",
    "source_script",
    "wrapper",
    "template",
    "_script",
}  # wrapper: a base64 query that would hide anything
MAX_SIZE = 1000


def validate(dsl: Any) -> dict[str, Any]:
    """The user's search body, checked; raises QueryRejected naming the offending key."""
    if not isinstance(dsl, Mapping):
        raise QueryRejected(f"trace query must be a search body (a dict), got {type(dsl).__name__}")
    extra = set(dsl) - ALLOWED_TOP
    if extra:
        raise QueryRejected(
            f"trace query: only a search is allowed; unsupported key(s) {sorted(extra)} "
            f"(allowed: {sorted(ALLOWED_TOP)})"
        )

    def walk(node: Any, path: str) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                low = str(k).lower()
                if low in FORBIDDEN or "script" in low:
                    what = "scripts are" if "script" in low or low == "painless" else f"{k!r} is"
                    raise QueryRejected(
                        f"trace query rejected at {path}{k}: {what} not allowed (read-only search scoped to this run)"
                    )
                walk(v, f"{path}{k}.")
        elif isinstance(node, (list, tuple)):
            for i, v in enumerate(node):
                walk(v, f"{path}{i}.")

    walk(dsl, "")
    size = dsl.get("size", 100)
    if not isinstance(size, int) or size < 0:
        raise QueryRejected(f"trace query: size must be a non-negative integer, got {size!r}")
    return {**dsl, "size": min(size, MAX_SIZE)}


def scoped(
    dsl: Mapping[str, Any], run_filter: Mapping[str, Any], must_not: Sequence[Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """The checked body with its query wrapped so it can only match this run's documents."""
    body = validate(dsl)
    user = body.get("query") or {"match_all": {}}
    body["query"] = {"bool": {"filter": [run_filter], "must": [user], "must_not": list(must_not or [])}}
    return body


# -- the local evaluator: the subset of the query DSL that the local span store understands -------


def _get(doc: Mapping[str, Any], field: str) -> Any:
    field = field.removesuffix(".keyword")
    if field in doc:
        return doc[field]
    attrs = doc.get("attributes") or {}
    for prefix in ("attributes.", "span.attributes."):
        if field.startswith(prefix):
            key = field[len(prefix) :].replace("@", ".")
            return attrs.get(key)
    return attrs.get(field)


def _one(spec: Mapping[str, Any]) -> tuple[str, Any]:
    ((field, value),) = spec.items()
    if isinstance(value, Mapping) and "value" in value:
        value = value["value"]
    return field, value


def matches(doc: Mapping[str, Any], query: Mapping[str, Any]) -> bool:
    """Whether `doc` matches `query` (match_all, term, terms, match, prefix, wildcard, exists,
    range, bool). Anything else raises QueryRejected naming it."""
    if not query:
        return True
    ((kind, spec),) = query.items()
    if kind == "match_all":
        return True
    if kind == "term":
        field, value = _one(spec)
        return _get(doc, field) == value or str(_get(doc, field)) == str(value)
    if kind == "terms":
        ((field, values),) = spec.items()
        got = _get(doc, field)
        return got in values or str(got) in {str(v) for v in values}
    if kind in ("match", "match_phrase"):
        field, value = _one(spec)
        if isinstance(value, Mapping):
            value = value.get("query")
        return str(value).lower() in str(_get(doc, field) or "").lower()
    if kind == "prefix":
        field, value = _one(spec)
        return str(_get(doc, field) or "").startswith(str(value))
    if kind == "wildcard":
        field, value = _one(spec)
        pattern = "^" + re.escape(str(value)).replace(r"\*", ".*").replace(r"\?", ".") + "$"
        return re.match(pattern, str(_get(doc, field) or "")) is not None
    if kind == "exists":
        return _get(doc, spec["field"]) is not None
    if kind == "range":
        ((field, bounds),) = spec.items()
        got = _get(doc, field)
        if got is None:
            return False
        ops = {"gt": got.__gt__, "gte": got.__ge__, "lt": got.__lt__, "lte": got.__le__}
        return all(ops[op](v) for op, v in bounds.items() if op in ops)
    if kind == "bool":

        def each(key: str) -> list[Mapping[str, Any]]:
            v = spec.get(key) or []
            return [v] if isinstance(v, Mapping) else list(v)

        if not all(matches(doc, q) for q in each("must") + each("filter")):
            return False
        if any(matches(doc, q) for q in each("must_not")):
            return False
        should = each("should")
        need = spec.get("minimum_should_match", 1 if should and not (each("must") or each("filter")) else 0)
        return sum(1 for q in should if matches(doc, q)) >= int(need)
    raise QueryRejected(
        f"trace query: {kind!r} is not supported by the local span store "
        "(supported: match_all, term, terms, match, prefix, wildcard, exists, range, bool)"
    )
