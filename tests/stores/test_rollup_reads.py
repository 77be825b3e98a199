"""Rollups read summaries through each store's bulk read path, and the figures are the ones the
full results give. (Timings are benchmarks/rollup.py's business, not a test's.)"""

from __future__ import annotations

from agent_health.analysis.insights import rollup_recommendations
from agent_health.analysis.rollup import load_summaries, rollup
from agent_health.model import Insight
from agent_health.stores import ResultKey, ResultSummary, S3ResultStore
from tests.stores.results import make_result


def suite_results(n: int = 90):
    out = []
    for i in range(n):
        status = ("passed", "failed", "errored")[i % 3]
        extra = {"epochs": 3, "pass_at_k": 1.0, "pass_hat_k": 0.0, "flaky": True} if i % 10 == 0 else {}
        insights = (Insight(rule="ignored_tool_errors", severity="error", summary="s", recommendation="check"),)
        out.append(
            make_result(
                f"rca::t{i:03d}",
                status=status,
                duration_ms=float(i),
                labels=(f"group:{i % 4}",),
                error="agent unreachable" if status == "errored" else None,
                insights=insights if i % 5 == 0 else (),
                **extra,
            )
        )
    return out


def test_rollups_over_summaries_equal_rollups_over_full_results(store):
    results = suite_results()
    store.put_many(results)
    ids = [r.test_id for r in results] + ["rca::not-stored"]
    summaries = load_summaries(store, "demo@v1", "rca", ids)
    assert all(type(s) is ResultSummary for s in summaries) and len(summaries) == len(results)
    from_summaries = rollup(summaries, "rca", "demo@v1", rollup_recommendations(summaries))
    from_results = rollup(results, "rca", "demo@v1", rollup_recommendations(results))
    assert from_summaries == from_results
    assert from_summaries.total == 90 and from_summaries.errored == 30 and from_summaries.epoch_tests == 6
    assert from_summaries.recommendations[0]["count"] == 18
    assert load_summaries(store, "demo@v1", "rca") == summaries  # every stored one, by listing


def test_s3_summaries_come_from_one_cache_object_once_warm(s3_store):
    store = s3_store
    assert isinstance(store, S3ResultStore)
    store.put_many(suite_results())
    gets: list[str] = []
    client = store.bucket.client
    client.meta.events.register("provide-client-params.s3.GetObject", lambda params, **kw: gets.append(params["Key"]))
    keys = [ResultKey("demo@v1", "rca", f"rca::t{i:03d}") for i in range(90)]
    cold = list(store.get_summaries(keys))
    assert len(gets) == 91  # every result once, plus the (absent) cache
    gets.clear()
    assert list(store.get_summaries(keys)) == cold
    assert len(gets) == 1 and gets[0].endswith("_summaries/demo@v1/rca.json")
    store.put(make_result("rca::t005", status="passed", score=0.25))  # another worker rewrites one
    gets.clear()
    warm = {s.test_id: s for s in store.get_summaries(keys)}
    assert warm["rca::t005"].score == 0.25
    assert len(gets) == 2  # the cache, and only the result that changed
