"""Rollups, leaderboard and comparisons over real engine results and edge cases."""

from __future__ import annotations

import pytest

from agent_health import TestResult, Usage, load_config, load_tests
from agent_health.analysis.compare import compare, default_pair
from agent_health.analysis.rollup import leaderboard, percentile, rollup
from agent_health.errors import ConfigError
from agent_health.session import run_tests
from tests.evalkit import write_config, write_evals


def r(tid: str, status: str = "passed", agent: str = "demo@v1", **kw) -> TestResult:
    return TestResult(test_id=tid, name=tid, suite="s", source_file="s.eval.py", agent=agent, status=status, **kw)


def test_pass_rate_excludes_errored_and_lists_them():
    results = [
        r("s::a", score=1.0, labels=("category:RCA",), duration_ms=10, cost_usd=0.01, usage=Usage.of(100, 50)),
        r("s::b", "failed", score=0.2, labels=("category:RCA",), duration_ms=20, cost_usd=0.02),
        r("s::c", "errored", error="agent endpoint http://x refused", duration_ms=30),
        r("s::d", "passed", score=0.8, duration_ms=40),
    ]
    ru = rollup(results, "s", "demo@v1")
    assert (ru.total, ru.passed, ru.failed, ru.errored) == (4, 2, 1, 1)
    assert ru.pass_rate == pytest.approx(2 / 3)
    assert ru.errored_share == 0.25
    assert ru.mean_score == pytest.approx((1.0 + 0.2 + 0.8) / 3)
    assert ru.cost_usd == pytest.approx(0.03) and ru.total_tokens == 150
    assert ru.latency_p50_ms == 25 and ru.latency_p95_ms == pytest.approx(38.5)
    assert ru.failing == ["s::b"]
    assert [(e.test_id, e.error) for e in ru.errored_tests] == [("s::c", "agent endpoint http://x refused")]
    rca = ru.labels["category:RCA"]
    assert (rca.total, rca.passed, rca.failed, rca.pass_rate) == (2, 1, 1, 0.5)
    assert ru.pass_at_k is None  # no epochs used
    md = ru.to_markdown()
    assert "| pass_rate | 0.6667 |" in md and "s::c" in md and "category:RCA" in md


def test_pass_at_k_only_from_tests_with_epochs():
    results = [
        r("s::a", epochs=3, pass_at_k=1.0, pass_hat_k=0.0, flaky=True),
        r("s::b", "failed", epochs=3, pass_at_k=0.0, pass_hat_k=0.0),
        r("s::c"),
    ]
    ru = rollup(results, "s", "demo@v1")
    assert ru.pass_at_k == 0.5 and ru.pass_hat_k == 0.0 and ru.epoch_tests == 2 and ru.flaky == 1


def test_empty_and_all_errored():
    assert rollup([], "s", "a@1").pass_rate is None
    ru = rollup([r("s::a", "errored")], "s", "a@1")
    assert ru.pass_rate is None and ru.errored_share == 1.0 and "pass_rate" not in ru.metrics()
    assert percentile([5.0], 95) == 5.0 and percentile([], 50) is None


def test_leaderboard_ranks_and_totals():
    a = rollup([r("s::a"), r("s::b", "failed")], "s", "demo@v1")
    b = rollup([r("s::a", agent="demo@v2"), r("s::b", agent="demo@v2")], "s", "demo@v2")
    c = rollup([r("t::a", agent="demo@v2", score=1.0)], "t", "demo@v2")
    board = leaderboard([a, b, c])
    assert [(x.suite, x.agent) for x in board.rows] == [("s", "demo@v2"), ("s", "demo@v1"), ("t", "demo@v2")]
    assert [(x.agent, x.passed, x.total) for x in board.totals] == [("demo@v2", 3, 3), ("demo@v1", 1, 2)]
    assert "| demo@v2 | * | 3 | 1 |" in board.to_markdown()  # tests with a result, then the pass rate


def test_comparison_flips_and_deltas():
    base = [
        r("s::a", score=1.0, cost_usd=0.01, duration_ms=10),
        r("s::b", "failed", score=0.0),
        r("s::c", "passed"),
        r("s::gone"),
    ]
    cand = [
        r("s::a", "failed", agent="demo@v2", score=0.25, cost_usd=0.04, duration_ms=25),
        r("s::b", agent="demo@v2", score=1.0),
        r("s::c", "errored", agent="demo@v2", error="boom"),
        r("s::new", agent="demo@v2"),
    ]
    cmp = compare(base, cand, "demo@v1", "demo@v2")
    by = {t.test_id: t for t in cmp.tests}
    assert by["s::a"].flip == "regressed" and by["s::a"].score_delta == pytest.approx(-0.75)
    assert by["s::a"].cost_delta_usd == pytest.approx(0.03) and by["s::a"].latency_delta_ms == 15
    assert by["s::b"].flip == "fixed" and by["s::c"].flip == "newly_errored"
    assert by["s::gone"].flip == "removed" and by["s::new"].flip == "added"
    assert [t.test_id for t in cmp.regressions] == ["s::a", "s::c"]
    assert cmp.tests[0].test_id == "s::a"  # flips first
    assert cmp.baseline_pass_rate == 0.75 and cmp.candidate_pass_rate == pytest.approx(2 / 3)
    assert "regressed" in cmp.to_markdown()


def test_default_pair():
    assert default_pair(["demo@v1", "demo@v2", "demo@v3"]) == ("demo@v2", "demo@v3")
    assert default_pair(["demo@v1", "demo@v2", "demo@v3"], baseline="demo@v1") == ("demo@v1", "demo@v3")
    with pytest.raises(ConfigError, match="two agent versions"):
        default_pair(["demo@v1"])


def test_rollup_and_compare_real_demo_results(tmp_path):
    write_evals(tmp_path)
    write_config(tmp_path)
    config = load_config(cwd=tmp_path)
    tests = load_tests([config.path(config.eval_root)], root=config.path(config.eval_root)).tests
    v1, v2 = (run_tests(tests, config, ref) for ref in ("demo@v1", "demo@v2"))
    ru = rollup([x for x in v2 if x.suite == "rca/payments"], "rca/payments", "demo@v2")
    assert ru.total == 2 and ru.total_tokens > 0 and ru.cost_usd and ru.cost_usd > 0
    cmp = compare(v1, v2, "demo@v1", "demo@v2")
    assert {t.test_id for t in cmp.fixes} == {"cases::queue-backlog"}  # v2 finds the consumer root cause
    assert cmp.cost_delta_usd > 0  # v2 spends more tokens
