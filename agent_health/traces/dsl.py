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
MAX_DEPTH = 100  # nested objects and lists; OpenSearch itself accepts bool queries 100 levels deep


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

    # iterative, with a depth limit: a query nested thousands of levels deep is rejected here,
    # before anything recursive (the evaluator, json.dumps on the way to OpenSearch) sees it
    stack: list[tuple[Any, str, int]] = [(dsl, "", 1)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise QueryRejected(
                f"trace query rejected at {path or 'the top'}: nested more than {MAX_DEPTH} levels deep"
            )
        if isinstance(node, Mapping):
            for k, v in node.items():
                low = str(k).lower()
                if low in FORBIDDEN or "script" in low:
                    what = "scripts are" if "script" in low or low == "painless" else f"{k!r} is"
                    raise QueryRejected(
                        f"trace query rejected at {path}{k}: {what} not allowed (read-only search scoped to this run)"
                    )
                stack.append((v, f"{path}{k}.", depth + 1))
        elif isinstance(node, (list, tuple)):
            stack.extend((v, f"{path}{i}.", depth + 1) for i, v in enumerate(node))
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
# It follows OpenSearch's semantics where they are defined (checked against a real node in
# tests/faults/test_faults_trace_queries.py) and rejects, naming the problem, what OpenSearch rejects.

SUPPORTED = "match_all, term, terms, match, match_phrase, prefix, wildcard, exists, range, bool"
RANGE_BOUNDS = {"gt", "gte", "lt", "lte", "from", "to", "include_lower", "include_upper", "boost"}
_INT = re.compile(r"[+-]?\d+")


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


def _single(kind: str, spec: Any) -> tuple[str, Any]:
    """The one field of a leaf query (`{"term": {"field": value}}`); OpenSearch refuses more."""
    if not isinstance(spec, Mapping) or not spec:
        raise QueryRejected(f"trace query: [{kind}] needs an object with one field, got {spec!r:.80}")
    fields = [k for k in spec if k != "boost"] if kind == "terms" else list(spec)
    if len(fields) != 1:
        raise QueryRejected(
            f"trace query: [{kind}] query doesn't support multiple fields, found {', '.join(map(repr, fields))}"
        )
    return fields[0], spec[fields[0]]


def _one(kind: str, spec: Any) -> tuple[str, Any]:
    field, value = _single(kind, spec)
    if isinstance(value, Mapping) and "value" in value:
        value = value["value"]
    return field, value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _keyword(value: Any) -> str:
    """A query value as OpenSearch writes it into a keyword comparison."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _comparable(got: Any, bound: Any, kind: str, field: str) -> Any:
    """`bound` converted to the type of the document's value, as OpenSearch converts a query
    value to the field's type; a value that type cannot take is rejected, as OpenSearch does."""
    if isinstance(bound, (Mapping, list, tuple)):
        raise QueryRejected(f"trace query: [{kind}] on {field!r}: {bound!r:.60} is not a value")
    if isinstance(got, bool):
        if isinstance(bound, bool) or _keyword(bound) in ("true", "false"):
            return bound if isinstance(bound, bool) else _keyword(bound) == "true"
        raise QueryRejected(f"trace query: [{kind}] on boolean field {field!r}: {bound!r} is not true or false")
    if _is_number(got):
        if _is_number(bound):
            return bound
        try:
            if isinstance(bound, str):
                return float(bound.strip())
        except ValueError:
            pass
        raise QueryRejected(f"trace query: [{kind}] on numeric field {field!r}: {bound!r} is not a number")
    return _keyword(bound)


def _values(got: Any) -> list[Any]:
    """A field's values: an array field matches when any element does (as in OpenSearch)."""
    if got is None:
        return []
    return [v for v in got if v is not None] if isinstance(got, (list, tuple)) else [got]


def _equal(got: Any, value: Any, kind: str, field: str) -> bool:
    want = _comparable(got, value, kind, field)
    return (got == want) if isinstance(got, bool) or _is_number(got) else (_keyword(got) == want)


def _in_range(got: Any, bounds: Any, field: str) -> bool:
    if not isinstance(bounds, Mapping):
        raise QueryRejected(f"trace query: [range] on {field!r} needs an object of bounds, got {bounds!r:.60}")
    unknown = set(bounds) - RANGE_BOUNDS
    if unknown:
        raise QueryRejected(
            f"trace query: [range] on {field!r}: {sorted(unknown)} not supported by the local span store "
            f"(supported: {sorted(RANGE_BOUNDS)})"
        )
    low_open = bounds.get("include_lower", True) is False
    high_open = bounds.get("include_upper", True) is False
    checks = [
        ("gt", bounds.get("gt"), lambda a, b: a > b),
        ("gte", bounds.get("gte"), lambda a, b: a >= b),
        ("lt", bounds.get("lt"), lambda a, b: a < b),
        ("lte", bounds.get("lte"), lambda a, b: a <= b),
        ("from", bounds.get("from"), (lambda a, b: a > b) if low_open else (lambda a, b: a >= b)),
        ("to", bounds.get("to"), (lambda a, b: a < b) if high_open else (lambda a, b: a <= b)),
    ]
    value = got if isinstance(got, bool) or _is_number(got) else _keyword(got)
    for _, bound, test in checks:
        if bound is None:  # an open end, as in OpenSearch
            continue
        if not test(value, _comparable(got, bound, "range", field)):
            return False
    return True


def minimum_should_match(spec: Any, optional: int) -> int:
    """How many `should` clauses must match, by OpenSearch's rules: an integer, a percentage
    (rounded down), either negative (that many may be missed), or conditional specs such as
    `"3<90%"` (all clauses up to 3, then 90%). Anything else is rejected."""
    if isinstance(spec, bool) or not isinstance(spec, (int, str)):
        raise QueryRejected(f"trace query: minimum_should_match {spec!r} is not an integer or a percentage")
    text = str(spec).strip()
    if "<" in text:
        result = optional
        for part in re.sub(r"\s*<\s*", "<", text).split():
            upper, sep, rest = part.partition("<")
            if not sep or not _INT.fullmatch(upper):
                raise QueryRejected(f"trace query: minimum_should_match {spec!r}: expected N<spec conditions")
            if optional <= int(upper):
                return result
            result = minimum_should_match(rest, optional)
        return result
    if text.endswith("%"):
        number = text[:-1]
        if not _INT.fullmatch(number):
            raise QueryRejected(
                f"trace query: minimum_should_match {spec!r}: a percentage is a whole number, like '50%'"
            )
        calc = optional * int(number) / 100
        result = optional + int(calc) if calc < 0 else int(calc)
    else:
        if not _INT.fullmatch(text):
            raise QueryRejected(f"trace query: minimum_should_match {spec!r} is not an integer or a percentage")
        calc_int = int(text)
        result = optional + calc_int if calc_int < 0 else calc_int
    return max(result, 0)


def matches(doc: Mapping[str, Any], query: Mapping[str, Any]) -> bool:
    """Whether `doc` matches `query` (see SUPPORTED). Anything else, and anything OpenSearch
    would refuse (two query types in one object, a range bound the field's type cannot take, a
    malformed minimum_should_match), raises QueryRejected naming it."""
    if not isinstance(query, Mapping) or len(query) != 1:
        found = sorted(map(str, query)) if isinstance(query, Mapping) else type(query).__name__
        raise QueryRejected(f"trace query: a query object holds exactly one query type, got {found}")
    ((kind, spec),) = query.items()
    if kind == "match_all":
        return True
    if kind == "term":
        field, value = _one(kind, spec)
        return any(_equal(got, value, kind, field) for got in _values(_get(doc, field)))
    if kind == "terms":
        field, wanted = _single(kind, spec)
        if not isinstance(wanted, (list, tuple)):
            raise QueryRejected(f"trace query: [terms] on {field!r} needs a list of values")
        return any(_equal(got, v, kind, field) for got in _values(_get(doc, field)) for v in wanted)
    if kind in ("match", "match_phrase"):
        field, value = _one(kind, spec)
        if isinstance(value, Mapping):
            value = value.get("query")
        return str(value).lower() in str(_get(doc, field) or "").lower()
    if kind == "prefix":
        field, value = _one(kind, spec)
        return any(_keyword(got).startswith(str(value)) for got in _values(_get(doc, field)))
    if kind == "wildcard":
        field, value = _one(kind, spec)
        pattern = re.compile(re.escape(str(value)).replace(r"\*", ".*").replace(r"\?", "."), re.S)
        return any(pattern.fullmatch(_keyword(got)) for got in _values(_get(doc, field)))
    if kind == "exists":
        if not isinstance(spec, Mapping) or not isinstance(spec.get("field"), str):
            raise QueryRejected("trace query: [exists] needs {'field': NAME}")
        return bool(_values(_get(doc, spec["field"])))
    if kind == "range":
        field, bounds = _single(kind, spec)
        return any(_in_range(got, bounds, field) for got in _values(_get(doc, field)))
    if kind == "bool":
        return _bool(doc, spec)
    raise QueryRejected(f"trace query: {kind!r} is not supported by the local span store (supported: {SUPPORTED})")


_BOOL_KEYS = {"must", "filter", "should", "must_not", "minimum_should_match", "boost"}


def _bool(doc: Mapping[str, Any], spec: Any) -> bool:
    if not isinstance(spec, Mapping):
        raise QueryRejected("trace query: [bool] needs an object of clauses")
    unknown = set(spec) - _BOOL_KEYS
    if unknown:
        raise QueryRejected(f"trace query: [bool] does not support {sorted(unknown)} (supported: {sorted(_BOOL_KEYS)})")

    def each(key: str) -> list[Mapping[str, Any]]:
        v = spec.get(key) or []
        return [v] if isinstance(v, Mapping) else list(v)

    must, filters, should, must_not = each("must"), each("filter"), each("should"), each("must_not")
    if not (must or filters or should or must_not):
        return True  # an empty bool matches everything
    if not all(matches(doc, q) for q in must + filters):
        return False
    if any(matches(doc, q) for q in must_not):
        return False
    if "minimum_should_match" in spec:
        need = minimum_should_match(spec["minimum_should_match"], len(should))
    else:
        need = 1 if should and not (must or filters) else 0
    if should and not (must or filters):
        need = max(need, 1)  # without must/filter, at least one should clause matches (Lucene), whatever the minimum
    return sum(1 for q in should if matches(doc, q)) >= need
