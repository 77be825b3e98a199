"""compare_results: flips, noise with epochs, and the statistics on worked examples."""

from __future__ import annotations

import json

import pytest

from agent_health.analysis.compare import Comparison, compare, compare_results
from agent_health.errors import ConfigError
from agent_health.stores import ResultSummary
from tests.reports.helpers import epochs, result


def test_a_flip_within_its_trials_noise_is_noise_not_a_regression():
    # baseline 3/3 passed, candidate 2/3 (so "failed"): Fisher on [[3,0],[2,1]] -- row 3, column 5 of 6;
    # x = 2 or 3, weights C(3,2)C(3,3) = 3 and C(3,3)C(3,2) = 3 of C(6,5) = 6; both as likely -> p = 1
    cmp = compare_results([epochs("wobbly", 3, 0)], [epochs("wobbly", 2, 1, agent="demo@v2")])
    (t,) = cmp.tests
    assert t.flip == "noise" and t.noise_of == "regressed" and t.flip_p_value == pytest.approx(1.0)
    assert (t.baseline_trials.passed, t.baseline_trials.graded) == (3, 3)
    assert (t.candidate_trials.passed, t.candidate_trials.graded) == (2, 3)
    assert cmp.regressions == [] and cmp.regressed_tests == [] and [x.test_id for x in cmp.noise] == ["s::wobbly"]
    # the McNemar pairs still see the status flip: the suite-level test is about statuses
    assert cmp.stats.mcnemar.regressed == 1


def test_a_flip_beyond_the_noise_is_a_regression():
    # 5/5 -> 0/5: Fisher p = 2/252 = 0.0079 < 0.05
    cmp = compare_results([epochs("broke", 5, 0)], [epochs("broke", 0, 5, agent="demo@v2")])
    (t,) = cmp.tests
    assert t.flip == "regressed" and t.flip_p_value == pytest.approx(2 / 252) and cmp.regressed_tests == ["s::broke"]
    # 1/5 -> 5/5: Fisher [[1,4],[5,0]] -- row 5, column 6 of 10; x = 1..5 weighs C(5,x)C(5,6-x) =
    # 5, 50, 100, 50, 5 of C(10,6) = 210; as unlikely as x = 1: x = 1 and x = 5 -> 10/210 = 0.0476 < 0.05
    rev = compare_results([epochs("x", 1, 4)], [epochs("x", 5, 0, agent="demo@v2")])
    assert rev.tests[0].flip == "fixed" and rev.tests[0].flip_p_value == pytest.approx(10 / 210)
    # 4/5 -> 5/5: [[4,1],[5,0]] -- row 5, column 9 of 10; x = 4: C(5,4)C(5,5) = 5 and
    # x = 5: C(5,5)C(5,4) = 5 of C(10,9) = 10; both as likely -> p = 1: noise, in the "fixed" direction
    near = compare_results([epochs("x", 4, 1)], [epochs("x", 5, 0, agent="demo@v2")])
    assert near.tests[0].flip == "noise" and near.tests[0].noise_of == "fixed"
    assert near.tests[0].flip_p_value == pytest.approx(1.0)


def test_alpha_decides_the_noise_rule():
    # the same 1/5 -> 5/5 flip (p = 0.0476) is noise at alpha 0.01
    cmp = compare_results([epochs("x", 1, 4)], [epochs("x", 5, 0, agent="demo@v2")], alpha=0.01)
    assert cmp.tests[0].flip == "noise"
    with pytest.raises(ConfigError, match="alpha"):
        compare_results([], [], alpha=0)


def test_a_single_trial_flip_counts_as_it_is():
    cmp = compare_results([result("t")], [result("t", "failed", "demo@v2")])
    assert cmp.tests[0].flip == "regressed" and cmp.tests[0].flip_p_value is None


def test_suite_statistics_worked_example():
    # 10 common tests: 6 fixed (fail -> pass), 4 passed on both; 1 errored on the candidate is left out of
    # the pairs and of the candidate's pass rate; 1 test only the candidate ran
    base = [result(f"f{i}", "failed", score=0.0) for i in range(6)] + [result(f"p{i}", score=1.0) for i in range(4)]
    base.append(result("err", score=1.0))
    cand = [result(f"f{i}", agent="demo@v2", score=1.0) for i in range(6)]
    cand += [result(f"p{i}", agent="demo@v2", score=1.0) for i in range(4)]
    cand += [result("err", "errored", "demo@v2", error="agent down"), result("new", agent="demo@v2", score=0.5)]
    cmp = compare_results(base, cand)
    s = cmp.stats
    assert (cmp.baseline, cmp.candidate) == ("demo@v1", "demo@v2")
    # baseline 5 passed of 11 graded; candidate 11 of 11
    assert (s.baseline_pass_rate.passed, s.baseline_pass_rate.graded) == (5, 11)
    assert (s.candidate_pass_rate.passed, s.candidate_pass_rate.graded) == (11, 11)
    assert s.candidate_pass_rate.high == 1.0
    # McNemar: b = 0 regressed, c = 6 fixed -> p = 2 * (1/2)^6 = 0.03125
    m = s.mcnemar
    assert (m.pairs, m.regressed, m.fixed, m.both_passed, m.both_failed) == (10, 0, 6, 4, 0)
    assert m.p_value == pytest.approx(0.03125) and s.significant and m.direction == "better"
    assert not cmp.significant_regression  # a significant improvement fails nothing
    # score deltas over the 10 common scored tests: six 1.0 and four 0.0 -> mean 0.6
    assert s.score_delta.estimate == pytest.approx(0.6) and s.score_delta.n == 10
    assert 0.0 < s.score_delta.low < 0.6 < s.score_delta.high <= 1.0
    assert cmp.flip_counts == {"newly_errored": 1, "fixed": 6, "added": 1, "same": 4}
    # the mirror image is a significant regression
    back = compare_results(cand, base)
    assert back.significant_regression and back.stats.mcnemar.direction == "worse"
    assert len(back.regressed_tests) == 6


def test_edge_cases_all_passed_and_nothing_at_all():
    same = compare_results([result("a"), result("b")], [result("a", agent="v"), result("b", agent="v")])
    assert same.stats.mcnemar.p_value == 1.0 and not same.stats.significant
    assert same.stats.baseline_pass_rate.estimate == 1.0 and same.stats.baseline_pass_rate.high == 1.0
    assert same.stats.score_delta.estimate is None  # no scores
    empty = compare_results([], [])
    assert (empty.baseline, empty.candidate) == ("baseline", "candidate")
    assert empty.stats.baseline_pass_rate.estimate is None and empty.stats.mcnemar.pairs == 0
    assert empty.stats.mcnemar.p_value == 1.0 and empty.tests == []


def test_summaries_compare_like_full_results_and_the_comparison_is_json():
    base = [epochs("w", 3, 0, score=1.0), result("a", score=0.5, cost_usd=0.01, duration_ms=5)]
    cand = [epochs("w", 2, 1, agent="demo@v2", score=0.6), result("a", "failed", "demo@v2", score=0.0)]
    full = compare_results(base, cand, seed=3)
    light = compare_results([ResultSummary.of(r) for r in base], [ResultSummary.of(r) for r in cand], seed=3)
    assert light == full
    data = json.loads(json.dumps(full.model_dump(mode="json")))
    assert data["regressed_tests"] == ["s::a"] and data["flip_counts"] == {"regressed": 1, "noise": 1}
    # both tests flipped pass -> fail (b = 2, c = 0): p = 2 * P(X <= 0) = 2 * 1/4 = 0.5
    assert data["stats"]["mcnemar"]["p_value"] == 0.5
    assert Comparison.model_validate(data).tests == full.tests


def test_compare_keeps_its_positional_form_for_the_dagster_assets():
    cmp = compare([result("a")], [result("a", "failed", "demo@v2")], "base", "cand")
    assert (cmp.baseline, cmp.candidate, cmp.regressed_tests) == ("base", "cand", ["s::a"])
    assert "McNemar exact p" in cmp.to_markdown()


def test_a_comparison_counts_the_tests_one_side_has_no_result_for():
    base = [result(f"t{i}") for i in range(3)]
    cand = [result(f"t{i}", agent="demo@v2") for i in range(1, 6)]
    cmp = compare_results(base, cand)
    assert (cmp.compared_tests, cmp.baseline_missing_results, cmp.candidate_missing_results) == (2, 3, 1)
    assert cmp.baseline_missing == ["s::t3", "s::t4", "s::t5"] and cmp.candidate_missing == ["s::t0"]
    assert not cmp.complete
    line = "partial: 2 of 6 test(s) compared; 3 candidate test(s) have no baseline result (added), "
    line += "1 baseline test(s) have no candidate result (removed)"
    assert cmp.coverage_line() == line and line in cmp.to_markdown()
    dumped = cmp.model_dump(mode="json")
    assert (dumped["baseline_missing_results"], dumped["candidate_missing_results"], dumped["complete"]) == (
        3,
        1,
        False,
    )
    whole = compare_results(base, [result(f"t{i}", agent="demo@v2") for i in range(3)])
    assert whole.complete and whole.coverage_line() == "complete: every one of the 3 test(s) has a result on both sides"


def test_the_documented_partial_comparison_line_is_what_compare_prints():
    """docs/reports.md's example: a baseline run killed after 226 of 500 tests."""
    from tests.conftest import ROOT

    text = (ROOT / "docs" / "reports.md").read_text()
    documented = "partial:" + text.split("```text\npartial:", 1)[1].split("```", 1)[0].rstrip()
    cmp = compare_results(
        [result(f"t{i:03d}") for i in range(226)], [result(f"t{i:03d}", agent="demo@v2") for i in range(500)]
    )
    assert cmp.coverage_line() == documented
