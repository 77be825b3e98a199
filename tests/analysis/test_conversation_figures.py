"""A conversation's figures reach everything downstream of a result: its derived metrics and
metric signals, the insights, the stored summary, the suite rollup and the per-version metric
numbers, the Dagster partition metadata, and the HTML report's data. Run on the shipped
conversational suite (evals/conversations.eval.py) with both demo versions."""

from __future__ import annotations

import json

import pytest

from agent_health import load_tests, run_tests
from agent_health.analysis.metrics import shown_signals
from agent_health.analysis.rollup import rollup
from agent_health.config import define_config
from agent_health.model import RunSettings
from agent_health.pipeline import partition_metadata
from agent_health.pipeline.version import metric_distributions, metric_numbers
from agent_health.reporters.html import result_details
from agent_health.stores.summary import ResultSummary
from tests.conftest import ROOT

SUITE = ROOT / "evals" / "conversations.eval.py"
SIMULATED = "conversations::a-simulated-on-call-engineer-learns-why-checkout-is-slow"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("conv")
    config = define_config(root=str(root))
    tests = load_tests([SUITE]).tests
    out = {}
    for agent in ("demo@v1", "demo@v2"):
        for r in run_tests(tests, config, settings=RunSettings(agents=(agent,), store=None)):
            out[agent, r.test_id] = r
    return out


def test_the_shipped_suite_tells_the_versions_apart(results):
    assert {k[1]: r.status for k, r in results.items() if k[0] == "demo@v2"} == dict.fromkeys(
        {k[1] for k in results}, "passed"
    )
    assert {r.status for k, r in results.items() if k[0] == "demo@v1"} == {"failed"}


def test_metrics_signals_and_insights_of_a_conversation(results):
    v2, v1 = results["demo@v2", SIMULATED], results["demo@v1", SIMULATED]
    assert (v2.metrics["turns"], v2.metrics["goal_reached"], v2.metrics["turns_to_goal"]) == (2, True, 2)
    assert v2.metrics["conversation_end"] == "goal_reached" and len(v2.metrics["turn_latency_ms"]) == 2
    assert (v1.metrics["turns"], v1.metrics["goal_reached"], v1.metrics["turns_to_goal"]) == (3, False, None)
    signals = {s.name: s.value for s in shown_signals(v2) if s.kind == "metric"}
    assert signals["metric:turns"] == 2 and signals["metric:goal_reached"] == 1 and signals["metric:turns_to_goal"] == 2
    assert "metric:turns_to_goal" not in {s.name for s in shown_signals(v1)}  # never reached: no number
    (unresolved,) = [i for i in v1.insights if i.rule == "conversation_unresolved"]
    assert unresolved.summary == "the simulated user gave up after 3 turn(s) without reaching its goal"
    assert unresolved.evidence["goal"] == "learn that the redis cache hit ratio dropped"
    assert not [i for i in v2.insights if i.rule == "conversation_unresolved"]


def test_summaries_rollups_and_metric_numbers_carry_the_conversation_figures(results):
    for agent, rate, to_goal in (("demo@v2", 1.0, 2.0), ("demo@v1", 0.0, None)):
        mine = [r for k, r in results.items() if k[0] == agent]
        # what a rollup reads: the stored summary, round-tripped through JSON as a store keeps it
        summaries = [ResultSummary.model_validate_json(r.model_dump_json()) for r in mine]
        simulated = next(s for s in summaries if s.test_id == SIMULATED)
        assert simulated.metrics["goal_reached"] == rate and simulated.metrics["turns"] in (2.0, 3.0)
        for source in (mine, summaries):  # whole results and summaries roll up alike
            r = rollup(source, "conversations", agent)
            assert r.conversations == 3 and r.goal_rate == rate and r.mean_turns_to_goal == to_goal
            assert r.metrics()["conversations"] == 3 and r.metrics()["goal_rate"] == rate
        numbers = metric_numbers(metric_distributions(summaries))
        assert numbers["goal_rate"] == rate and numbers["turns_mean"] > 1
    v2 = rollup([r for k, r in results.items() if k[0] == "demo@v2"], "conversations", "demo@v2")
    assert v2.mean_turns == pytest.approx((2 + 2 + 2) / 3)


def test_the_partition_metadata_shows_the_conversation(results):
    meta = partition_metadata(results["demo@v2", SIMULATED])
    assert (meta["turns"], meta["conversation_end"], meta["goal_reached"], meta["turns_to_goal"]) == (
        2,
        "goal_reached",
        True,
        2,
    )
    failed = partition_metadata(results["demo@v1", SIMULATED])
    assert failed["goal_reached"] is False and "turns_to_goal" not in failed and failed["conversation_end"] == "gave_up"
    # a run of one turn shows none of them
    one = results["demo@v2", SIMULATED].model_copy(update={"metrics": {"tool_calls": 1}})
    assert not {"turns", "goal_reached", "turns_to_goal", "conversation_end"} & set(partition_metadata(one))


def test_the_html_report_carries_every_turn(results):
    details = result_details(results["demo@v2", SIMULATED])
    run = details["run"]
    assert [t["user"] for t in run["turns"]] == [
        "Something is broken in production, can you help?",
        "checkout p99 latency is 4 seconds",
    ]
    assert run["conversation"]["goal_reached"] is True and "raw_events" not in run
    json.dumps(details)  # the page embeds it as JSON


def test_compare_tells_which_conversations_flipped(results):
    from agent_health.analysis.compare import compare_results

    v1 = [r for k, r in results.items() if k[0] == "demo@v1"]
    v2 = [r for k, r in results.items() if k[0] == "demo@v2"]
    cmp = compare_results(v1, v2)
    assert len(v2) == 3 and sorted(t.test_id for t in cmp.fixes) == sorted(r.test_id for r in v2)
    assert not cmp.regressions
