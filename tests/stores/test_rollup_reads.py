"""Rollups read summaries through each store's bulk read path, and the figures are the ones the
full results give. (Timings are benchmarks/rollup.py's business, not a test's.)"""

from __future__ import annotations

from agent_health.analysis.insights import rollup_recommendations
from agent_health.analysis.rollup import load_summaries, rollup
from agent_health.stores import ResultSummary
from tests.stores.results import suite_results


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
