"""Rollups read summaries through each store's bulk read path, and the figures are the ones the
full results give. (Timings are benchmarks/rollup.py's business, not a test's.)"""

from __future__ import annotations

from agent_health.analysis.insights import rollup_recommendations
from agent_health.analysis.rollup import load_summaries, rollup
from agent_health.stores import ResultKey, ResultSummary
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


def test_opensearch_reads_most_of_a_suite_by_search_and_sees_every_acknowledged_write(
    request, tmp_path, project_config, monkeypatch
):
    from agent_health.stores import open_store
    from agent_health.stores import opensearch as module
    from tests.stores.conftest import new_store_settings

    monkeypatch.setattr(module, "SCAN_FROM", 10)  # a 90-result suite stands for a 10,000-result one
    store = open_store(project_config, new_store_settings("opensearch", request, tmp_path))
    results = suite_results()
    others = suite_results(5, suite="other")
    store.put_many(results + others)
    rewritten = results[7].model_copy(update={"status": "failed", "score": 0.0})
    store.put(rewritten)  # neither is refreshed yet: the search must still see both
    assert store.delete(ResultKey.of(results[8]))
    current = {r.test_id: r for r in [*results[:7], rewritten, *results[9:], *others]}
    by_id: list[str] = []
    get_many = store.results.get_many
    monkeypatch.setattr(store.results, "get_many", lambda ids, source=None: by_id.extend(ids) or get_many(ids, source))

    keys = [ResultKey("demo@v1", "rca", r.test_id) for r in results] + [ResultKey("demo@v1", "rca", "rca::nope")]
    keys += [ResultKey.of(others[0]), ResultKey.of(results[3]), ResultKey.of(others[1])]
    expected = [ResultSummary.of(current[k.test_id]) for k in keys if k.test_id in current]
    assert list(store.get_summaries(keys)) == expected  # in order, duplicates kept, missing skipped
    assert sorted(by_id) == sorted(module.key_id(ResultKey.of(r)) for r in others[:2])  # rca: one search

    by_id.clear()
    few = keys[:20]  # under half the suite: by id again
    assert list(store.get_summaries(few)) == [ResultSummary.of(current[k.test_id]) for k in few if k.test_id in current]
    assert len(by_id) == 20
