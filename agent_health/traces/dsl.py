"""Guarding the trace-query tool's `query(dsl)`: search bodies only, no scripts, nothing that reads
outside the run, and a small evaluator of the same DSL for the local span store."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
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
# OpenSearch's own limits, so the local span store refuses what the real node refuses (checked
# against it in tests/faults/test_faults_trace_queries.py) and no query's cost is unbounded
MAX_CLAUSES = 1024  # indices.query.bool.max_clause_count, over the whole query
MAX_TERMS = 65536  # index.max_terms_count, per terms query
MAX_RESULT_WINDOW = 10000  # index.max_result_window: from + size
MAX_TOTAL_CLAUSES = 4 * MAX_CLAUSES  # over all bool queries: OpenSearch has no such limit, evaluating has a cost
_MAX_INT = 2**31 - 1
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_CLAUSE_KEYS = ("must", "filter", "should", "must_not")
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
    clauses = 0
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
                if k == "bool" and isinstance(v, Mapping):
                    here = sum(_count(v.get(key)) for key in _CLAUSE_KEYS)
                    if here > MAX_CLAUSES:
                        raise QueryRejected(
                            f"trace query rejected at {path}{k}: {here} clauses in one bool query, more than "
                            f"{MAX_CLAUSES} (OpenSearch's indices.query.bool.max_clause_count)"
                        )
                    clauses += here
                    if clauses > MAX_TOTAL_CLAUSES:
                        raise QueryRejected(
                            f"trace query rejected at {path}{k}: more than {MAX_TOTAL_CLAUSES} bool clauses in all "
                            "(the trace-query tool's bound on what one query may cost)"
                        )
                elif k == "terms" and isinstance(v, Mapping):
                    for name, values in v.items():
                        if isinstance(values, (list, tuple)) and len(values) > MAX_TERMS:
                            raise QueryRejected(
                                f"trace query rejected at {path}{k}.{name}: {len(values)} terms, more than "
                                f"{MAX_TERMS} (OpenSearch's index.max_terms_count)"
                            )
                stack.append((v, f"{path}{k}.", depth + 1))
        elif isinstance(node, (list, tuple)):
            stack.extend((v, f"{path}{i}.", depth + 1) for i, v in enumerate(node))
    size = _whole(dsl, "size", 100)
    start = _whole(dsl, "from", 0)
    if start + min(size, MAX_SIZE) > MAX_RESULT_WINDOW:
        raise QueryRejected(
            f"trace query: from + size must be at most {MAX_RESULT_WINDOW} (OpenSearch's "
            f"index.max_result_window), got {start} + {min(size, MAX_SIZE)}"
        )
    return {**dsl, "size": min(size, MAX_SIZE), "from": start}


def _count(clauses: Any) -> int:
    return len(clauses) if isinstance(clauses, (list, tuple)) else int(clauses is not None)


def _whole(body: Mapping[str, Any], key: str, default: int) -> int:
    """`from` or `size` as OpenSearch reads it: a number or a numeric string, cut to a whole number,
    within an int and not negative. Anything else (true, null, a list, "abc") is rejected."""
    if key not in body:
        return default
    value = body[key]
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        number = float(value.strip())
    if number is None or not math.isfinite(number):
        raise QueryRejected(f"trace query: {key} must be a non-negative integer, got {value!r:.60}")
    whole = int(number)  # toward zero, as OpenSearch coerces 1.7 (or "1.7") to 1
    if whole < 0:
        raise QueryRejected(f"trace query: {key} cannot be negative, got {value!r}")
    if whole > _MAX_INT:
        raise QueryRejected(f"trace query: {key} {value!r} is out of range for an integer")
    return whole


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


def _reader(field: str) -> Callable[[Mapping[str, Any]], Any]:
    """How to read `field` from a span: a top-level key, else an attribute (`attributes.` and
    `span.attributes.` prefixes name attributes, `@` stands for a dot), `.keyword` ignored."""
    name = field.removesuffix(".keyword")
    key = name
    for prefix in ("attributes.", "span.attributes."):
        if name.startswith(prefix):
            key = name[len(prefix) :].replace("@", ".")
            break

    def read(doc: Mapping[str, Any]) -> Any:
        return doc[name] if name in doc else (doc.get("attributes") or {}).get(key)

    return read


def _values_of(field: str) -> Callable[[Mapping[str, Any]], list[Any]]:
    """A span's values of `field`: an array field matches when any element does (as in OpenSearch)."""
    read = _reader(field)

    def values(doc: Mapping[str, Any]) -> list[Any]:
        got = read(doc)
        if got is None:
            return []
        return [v for v in got if v is not None] if isinstance(got, (list, tuple)) else [got]

    return values


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
    checks: list[tuple[str, Any, Callable[[Any, Any], bool]]] = [
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


Matcher = Callable[[Mapping[str, Any]], bool]


def matches(doc: Mapping[str, Any], query: Mapping[str, Any]) -> bool:
    """Whether `doc` matches `query` (see `compile_query`; to test many documents, compile once)."""
    return compile_query(query)(doc)


def compile_query(query: Mapping[str, Any]) -> Matcher:
    """A function telling whether a document matches `query` (see SUPPORTED). Anything else, and
    anything OpenSearch would refuse (two query types in one object, a range bound the field's type
    cannot take, a malformed minimum_should_match), raises QueryRejected naming it: at once when the
    query's shape is wrong, on the first document whose field type the query cannot take otherwise."""
    if not isinstance(query, Mapping) or len(query) != 1:
        found = sorted(map(str, query)) if isinstance(query, Mapping) else type(query).__name__
        raise QueryRejected(f"trace query: a query object holds exactly one query type, got {found}")
    ((kind, spec),) = query.items()
    if kind == "match_all":
        return lambda doc: True
    if kind == "term":
        field, value = _one(kind, spec)
        return _terms(field, [value], kind)
    if kind == "terms":
        field, wanted = _single(kind, spec)
        if not isinstance(wanted, (list, tuple)):
            raise QueryRejected(f"trace query: [terms] on {field!r} needs a list of values")
        return _terms(field, wanted, kind)
    if kind in ("match", "match_phrase"):
        field, value = _one(kind, spec)
        if isinstance(value, Mapping):
            value = value.get("query")
        needle = str(value).lower()
        read = _reader(field)
        return lambda doc: needle in str(read(doc) or "").lower()
    if kind == "prefix":
        field, value = _one(kind, spec)
        start = str(value)
        values = _values_of(field)
        return lambda doc: any(_keyword(got).startswith(start) for got in values(doc))
    if kind == "wildcard":
        field, value = _one(kind, spec)
        pattern = wildcard_pattern(str(value))
        values = _values_of(field)
        return lambda doc: any(wildcard_match(pattern, _keyword(got)) for got in values(doc))
    if kind == "exists":
        if not isinstance(spec, Mapping) or not isinstance(spec.get("field"), str):
            raise QueryRejected("trace query: [exists] needs {'field': NAME}")
        values = _values_of(spec["field"])
        return lambda doc: bool(values(doc))
    if kind == "range":
        field, bounds = _single(kind, spec)
        values = _values_of(field)
        return lambda doc: any(_in_range(got, bounds, field) for got in values(doc))
    if kind == "bool":
        return _bool(spec)
    raise QueryRejected(f"trace query: {kind!r} is not supported by the local span store (supported: {SUPPORTED})")


def _terms(field: str, wanted: Sequence[Any], kind: str) -> Matcher:
    """[term] and [terms] as set lookups: the values are converted once per field type met (a
    boolean, a number or a keyword), not once per document, so a long list costs its length once."""
    converted: dict[str, set[Any]] = {}
    read = _reader(field)

    def hit(got: Any) -> bool:
        key: Any = got
        if isinstance(got, str):
            type_ = "keyword"
        elif isinstance(got, bool):
            type_ = "boolean"
        elif _is_number(got):
            type_ = "number"
        else:
            type_, key = "keyword", _keyword(got)
        if type_ not in converted:
            converted[type_] = {_comparable(got, v, kind, field) for v in wanted}
        return key in converted[type_]

    def test(doc: Mapping[str, Any]) -> bool:  # called per span and clause: kept to one call or two
        got = read(doc)
        if got is None:
            return False
        if isinstance(got, (list, tuple)):
            return any(hit(v) for v in got if v is not None)
        return hit(got)

    return test


_STAR, _ONE = object(), object()  # a wildcard pattern's `*` and `?`
WildcardPattern = list[Any]  # characters, _STAR and _ONE


def wildcard_pattern(value: str) -> WildcardPattern:
    """A wildcard query's pattern as Lucene reads it: `*` any run of characters, `?` one
    character, a backslash makes the next character literal."""
    out: WildcardPattern = []
    chars = iter(value)
    for c in chars:
        if c == "\\":
            out.append(next(chars, "\\"))
        elif c == "*":
            if not out or out[-1] is not _STAR:  # `**` is `*`
                out.append(_STAR)
        elif c == "?":
            out.append(_ONE)
        else:
            out.append(c)
    return out


def wildcard_match(pattern: WildcardPattern, text: str) -> bool:
    """Whether `text` matches the whole `pattern`, in at most len(pattern) * len(text) steps: on a
    mismatch only the last `*` takes one more character (a backtracking regex tries every split
    between the stars, which takes hours for a dozen stars over a short attribute)."""
    p = t = 0
    star, resume = -1, 0
    while t < len(text):
        if p < len(pattern) and pattern[p] is not _STAR and (pattern[p] is _ONE or pattern[p] == text[t]):
            p += 1
            t += 1
        elif p < len(pattern) and pattern[p] is _STAR:
            star, resume = p, t
            p += 1
        elif star >= 0:
            resume += 1
            p, t = star + 1, resume
        else:
            return False
    return all(token is _STAR for token in pattern[p:])


_BOOL_KEYS = {"must", "filter", "should", "must_not", "minimum_should_match", "boost"}


def _bool(spec: Any) -> Matcher:
    if not isinstance(spec, Mapping):
        raise QueryRejected("trace query: [bool] needs an object of clauses")
    unknown = set(spec) - _BOOL_KEYS
    if unknown:
        raise QueryRejected(f"trace query: [bool] does not support {sorted(unknown)} (supported: {sorted(_BOOL_KEYS)})")

    def each(key: str) -> list[Matcher]:
        v = spec.get(key) or []
        return [compile_query(q) for q in ([v] if isinstance(v, Mapping) else list(v))]

    must, should, must_not = each("must") + each("filter"), each("should"), each("must_not")
    if not (must or should or must_not):
        return lambda doc: True  # an empty bool matches everything
    if "minimum_should_match" in spec:
        need = minimum_should_match(spec["minimum_should_match"], len(should))
    else:
        need = 1 if should and not must else 0
    if should and not must:
        need = max(need, 1)  # without must/filter, at least one should clause matches (Lucene), whatever the minimum

    def test(doc: Mapping[str, Any]) -> bool:
        if not all(m(doc) for m in must) or any(m(doc) for m in must_not):
            return False
        return sum(1 for m in should if m(doc)) >= need

    return test
