"""Trace queries: a query nested thousands of levels deep is rejected (QueryRejected, a depth
limit) instead of a RecursionError, and the local span store's evaluator gives OpenSearch's answer
or rejects what OpenSearch rejects: the same queries run on the real node the suite starts and on
the local evaluator, over the same documents."""

from __future__ import annotations

import json

import httpx
import pytest

from agent_health.traces import dsl
from agent_health.traces.dsl import QueryRejected

DOCS = [
    {"name": "a", "service": "s1", "duration_ms": 5, "code": "10", "n": 1, "flag": True, "tags": ["x", "y"],
     "attributes": {"http_status": 200, "route": "/pay"}},
    {"name": "b", "service": "s2", "duration_ms": 50.5, "code": "9", "n": 2, "flag": False, "tags": ["y"],
     "attributes": {"http_status": 503, "route": "/checkout"}},
    {"name": "c", "service": "s1", "duration_ms": 500, "code": "5x", "n": 3, "attributes": {"http_status": 404}},
    {"name": "d", "service": "s3", "code": "abc", "attributes": {"route": "/pay/refund"}},
]  # fmt: skip
MAPPING = {
    "properties": {
        "name": {"type": "keyword"},
        "service": {"type": "keyword"},
        "duration_ms": {"type": "double"},
        "code": {"type": "keyword"},
        "n": {"type": "long"},
        "flag": {"type": "boolean"},
        "tags": {"type": "keyword"},
        "attributes": {"properties": {"http_status": {"type": "long"}, "route": {"type": "keyword"}}},
    }
}


def should(*clauses: dict, msm=None, **extra) -> dict:
    body = {"should": list(clauses), **extra}
    if msm is not None:
        body["minimum_should_match"] = msm
    return {"bool": body}


S1, A, C10 = {"term": {"service": "s1"}}, {"term": {"name": "a"}}, {"term": {"code": "10"}}

QUERIES = [
    # range over every pairing of field type and bound type
    {"range": {"duration_ms": {"gte": 40}}},
    {"range": {"duration_ms": {"gte": "40"}}},
    {"range": {"duration_ms": {"gte": "abc"}}},
    {"range": {"duration_ms": {"gte": [1]}}},
    {"range": {"duration_ms": {"gt": 5, "lte": 500}}},
    {"range": {"n": {"gte": 1.5}}},
    {"range": {"n": {"gte": "1.5"}}},
    {"range": {"n": {"gt": True}}},
    {"range": {"code": {"gte": 6}}},
    {"range": {"code": {"gte": "6"}}},
    {"range": {"code": {"gte": 5.0}}},
    {"range": {"code": {"lt": "5"}}},
    {"range": {"flag": {"gte": True}}},
    {"range": {"flag": {"lt": True}}},
    {"range": {"missing": {"gte": 1}}},
    {"range": {"name": {"gte": None}}},
    {"range": {"name": {"gte": "b", "lt": "d"}}},
    {"range": {"attributes.http_status": {"gte": 400}}},
    {"range": {"attributes.http_status": {"gte": "4xx"}}},
    {"range": {"tags": {"gte": "y"}}},
    {"range": {"n": {"from": 1, "to": 3, "include_lower": False}}},
    # a query object with two keys, a leaf query with two fields
    {"term": {"name": "a"}, "match_all": {}},
    {"range": {"n": {"gte": 1}}, "term": {"name": "a"}},
    {"term": {"name": "a", "service": "s1"}},
    {"range": {"n": {"gte": 1}, "duration_ms": {"gte": 1}}},
    {"bool": {"must": [{"term": {"name": "a"}, "term_x": {}}]}},
    {"bool": {"must": [{}]}},
    # minimum_should_match in every form OpenSearch knows, and some it refuses
    should(S1, {"term": {"name": "b"}}, msm="50%"),
    should(S1, A, msm="50%"),
    should(S1, A, C10, msm="50%"),
    should(S1, A, C10, msm="66%"),
    should(S1, A, C10, msm="67%"),
    should(S1, A, C10, msm="-50%"),
    should(S1, A, C10, msm=-1),
    should(S1, A, C10, msm=2),
    should(S1, A, msm=5),
    should(S1, A, msm="5"),
    should(S1, A, msm="0%"),
    should(S1, A, msm="100%"),
    should(S1, A, msm="-100%"),
    should(S1, A, msm=-5),
    should(S1, A, msm="2<50%"),
    should(S1, A, C10, msm="2<50%"),
    should(S1, A, C10, msm="1<-1 2<50%"),
    should(S1, A, msm="abc"),
    should(S1, A, msm=1.5),
    should(S1, A, msm=" 50 % "),
    should(S1, A, C10, msm="66.7%"),
    should(msm=1),
    should(S1, A, msm=1, must=[{"term": {"service": "s1"}}]),
    should(msm=1, must=[{"term": {"service": "s1"}}]),
    should(A, filter=[S1]),
    should(A, must_not=[{"term": {"name": "c"}}]),
    should(S1, A, msm=0, must_not=[{"term": {"name": "c"}}]),
    # the rest of the supported subset, for parity
    {"term": {"n": "1"}},
    {"term": {"n": "x"}},
    {"term": {"code": 10}},
    {"term": {"tags": "y"}},
    {"term": {"name": {"value": "b"}}},
    {"terms": {"code": [10, "9"]}},
    {"exists": {"field": "n"}},
    {"exists": {"field": "attributes.route"}},
    {"prefix": {"attributes.route": "/pay"}},
    {"wildcard": {"code": "*x"}},
    {"wildcard": {"attributes.route": "/pay?refund"}},
    # wildcards as Lucene reads them: a backslash makes the next character literal, runs of stars
    {"wildcard": {"code": "5\\x"}},
    {"wildcard": {"attributes.route": "\\/pay\\/refund"}},
    {"wildcard": {"attributes.route": "/pay\\*"}},
    {"wildcard": {"attributes.route": "*" * 13 + "refund"}},
    {"wildcard": {"attributes.route": "*p*a*y*/*r*e*f*u*n*d*"}},
    {"wildcard": {"code": "?"}},
    {"wildcard": {"code": "??"}},
    {"bool": {}},
    {"bool": {"must_not": [S1]}},
    {"bool": {"must": S1, "must_not": {"term": {"name": "c"}}}},
]


@pytest.fixture(scope="module")
def index(opensearch_url):
    client = httpx.Client(base_url=opensearch_url, timeout=30)
    client.delete("/faults-queries")
    assert client.put("/faults-queries", json={"mappings": MAPPING}).status_code == 200
    for i, doc in enumerate(DOCS):
        client.put(f"/faults-queries/_doc/{i}", json=doc).raise_for_status()
    client.post("/faults-queries/_refresh").raise_for_status()
    yield client
    client.delete("/faults-queries")
    client.close()


def on_opensearch(client: httpx.Client, query: dict) -> list[str] | str:
    r = client.post("/faults-queries/_search", json={"query": query, "size": 100})
    if r.status_code == 400:
        return "rejected"
    r.raise_for_status()
    return sorted(h["_source"]["name"] for h in r.json()["hits"]["hits"])


def locally(query: dict) -> list[str] | str:
    try:
        body = dsl.validate({"query": query})
        return sorted(d["name"] for d in DOCS if dsl.matches(d, body["query"]))
    except QueryRejected:
        return "rejected"


@pytest.mark.parametrize("query", QUERIES, ids=[json.dumps(q, separators=(",", ":"))[:70] for q in QUERIES])
def test_local_evaluator_answers_like_opensearch(index, query):
    assert locally(query) == on_opensearch(index, query)


def test_rejections_name_the_problem():
    def reason(query: dict) -> str:
        with pytest.raises(QueryRejected) as info:
            dsl.matches(DOCS[0], query)
        return str(info.value)

    assert "numeric field 'duration_ms': 'abc' is not a number" in reason({"range": {"duration_ms": {"gte": "abc"}}})
    assert "exactly one query type, got ['match_all', 'term']" in reason({"term": {"name": "a"}, "match_all": {}})
    assert "[term] query doesn't support multiple fields" in reason({"term": {"name": "a", "service": "s1"}})
    assert "a percentage is a whole number" in reason(should(S1, msm="66.7%"))
    assert "is not an integer or a percentage" in reason(should(S1, msm="abc"))


@pytest.mark.parametrize("depth", [101, 1000, 5000, 50_000])
@pytest.mark.parametrize("shape", ["bool", "list"])
def test_deeply_nested_query_is_rejected_not_a_recursion_error(depth, shape):
    query: dict = {"term": {"name": "a"}}
    for _ in range(depth):
        query = {"bool": {"must": [query]}} if shape == "bool" else {"bool": {"must": query}}
    with pytest.raises(QueryRejected, match="nested more than 100 levels deep"):
        dsl.validate({"query": query})


def test_nesting_within_the_limit_still_runs():
    query: dict = {"term": {"name": "a"}}
    for _ in range(30):  # 30 bool levels: 91 nested objects and lists
        query = {"bool": {"must": [query]}}
    body = dsl.validate({"query": query})
    assert [d["name"] for d in DOCS if dsl.matches(d, body["query"])] == ["a"]


def test_deep_query_through_the_opensearch_source_is_rejected_before_sending(opensearch_url):
    """The OpenSearch trace source checks the body with the same validator, before json.dumps
    (which would itself raise RecursionError at this depth)."""
    from agent_health.traces.dsl import scoped

    query: dict = {"match_all": {}}
    for _ in range(5000):
        query = {"bool": {"must": [query]}}
    with pytest.raises(QueryRejected):
        scoped({"query": query}, {"term": {"traceId": "t"}})


# -- bodies OpenSearch refuses or coerces, and queries whose cost must stay bounded -----------------
def on_opensearch_body(client: httpx.Client, body: dict) -> list[str] | str:
    r = client.post("/faults-queries/_search", json=body)
    if r.status_code == 400:
        return "rejected"
    r.raise_for_status()
    return [h["_source"]["name"] for h in r.json()["hits"]["hits"]]


@pytest.fixture(scope="module")
def local_source(tmp_path_factory):
    from agent_health.traces.local import LocalTraceSource

    return LocalTraceSource(tmp_path_factory.mktemp("spans"))


def locally_body(source, body: dict) -> list[str] | str:
    """What the local span store's search returns for `body` when DOCS are a run's spans."""
    from agent_health.traces.source import Fetched, RunRef

    try:
        return [d["name"] for d in source.search(RunRef("run"), Fetched(list(DOCS), "run_id"), body)]
    except QueryRejected:
        return "rejected"


MATCH_ALL = {"match_all": {}}
BODIES = [
    {"from": -1},
    {"size": -1},
    {"from": -0.5},
    {"size": True},
    {"from": True},
    {"size": None},
    {"from": None},
    {"size": [1]},
    {"size": {}},
    {"size": "abc"},
    {"size": "0x10"},
    {"size": "2"},
    {"size": " 2 "},
    {"size": "1e1"},
    {"size": 1.5},
    {"from": "1"},
    {"from": 1.7},
    {"from": 2**31},
    {"from": "2147483648"},
    {"from": 9999, "size": 2},
    {"from": 10000, "size": 0},
]


@pytest.mark.parametrize("body", BODIES, ids=[json.dumps(b, separators=(",", ":")) for b in BODIES])
def test_from_and_size_are_read_as_opensearch_reads_them(index, local_source, body):
    body = {"query": MATCH_ALL, **body}
    assert locally_body(local_source, body) == on_opensearch_body(index, body)


def term_clauses(n: int) -> list[dict]:
    return [{"term": {"name": f"x{i}"}} for i in range(n - 1)] + [A]


BOUNDED = {
    "should of 1024": should(*term_clauses(1024)),
    "should of 1025": should(*term_clauses(1025)),
    "filter of 1025": {"bool": {"filter": term_clauses(1025)}},
    "600 should and 425 must_not": should(*term_clauses(600), must_not=term_clauses(425)),
    "600 should and 424 must": should(*term_clauses(600), must=[MATCH_ALL] * 424),
    "terms of 65536": {"terms": {"name": [f"x{i}" for i in range(65535)] + ["b"]}},
    "terms of 65537": {"terms": {"name": [f"x{i}" for i in range(65536)] + ["b"]}},
    "terms of 200000": {"terms": {"name": [f"x{i}" for i in range(200_000)]}},
}


@pytest.mark.parametrize("name", list(BOUNDED))
def test_clause_and_terms_limits_are_opensearchs(index, name):
    assert locally(BOUNDED[name]) == on_opensearch(index, BOUNDED[name])


def test_limits_name_the_setting():
    with pytest.raises(QueryRejected, match=r"1025 clauses in one bool query, more than 1024 .*max_clause_count"):
        dsl.validate({"query": BOUNDED["should of 1025"]})
    with pytest.raises(QueryRejected, match=r"200000 terms, more than 65536 \(OpenSearch's index.max_terms_count\)"):
        dsl.validate({"query": BOUNDED["terms of 200000"]})
    with pytest.raises(QueryRejected, match=r"from cannot be negative, got -1"):
        dsl.validate({"from": -1})


def test_a_query_of_many_bool_queries_is_bounded_in_all():
    """OpenSearch takes any number of bool queries of 1024 clauses; the tool bounds their sum, so no
    query costs more than a few thousand clause checks per span."""
    query = {"bool": {"must": [should(*term_clauses(1000)) for _ in range(5)]}}
    with pytest.raises(QueryRejected, match=r"more than 4096 bool clauses in all"):
        dsl.validate({"query": query})
    dsl.validate({"query": {"bool": {"must": [should(*term_clauses(1000)) for _ in range(4)]}}})


HOSTILE_WILDCARD = """
from agent_health.traces import dsl

span = {{"name": "s", "attributes": {{"route": "/pay/refund/abcdefghijklmnopqrstuv"}}}}  # 34 characters
for pattern, expected in [({stars!r} + "x", False), ({stars!r} + "uv", True), ("*a" * 13 + "*", False)]:
    assert dsl.matches(span, {{"wildcard": {{"attributes.route": pattern}}}}) is expected, pattern
print("done")
"""


def test_a_wildcard_of_many_stars_cannot_freeze_the_process(tmp_path):
    """A backtracking regex took minutes for 13 stars over a 34-character attribute, holding the GIL
    (no timeout could fire). In its own process, so a regression fails here instead of hanging."""
    from tests.faults.conftest import python

    proc = python(HOSTILE_WILDCARD.format(stars="*" * 13), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr[-2000:]
