"""The comparison statistics against values worked out by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import random

import pytest

from agent_health.analysis.stats import (
    binomial_two_sided,
    fisher_exact,
    mcnemar_exact,
    paired_bootstrap,
    wilson_interval,
    z_value,
)

Z = 1.959963984540054  # NormalDist().inv_cdf(0.975)


def test_z_value_for_95_percent():
    assert z_value(0.95) == pytest.approx(Z)
    with pytest.raises(ValueError):
        z_value(1.0)


def test_wilson_interval_8_of_10():
    # p = 0.8, z^2/n = 3.841459/10 = 0.3841459
    # centre = (0.8 + 0.3841459/2) / 1.3841459 = 0.9920729 / 1.3841459 = 0.716738
    # half   = z * sqrt(0.8*0.2/10 + 3.841459/400) / 1.3841459
    #        = 1.959964 * sqrt(0.016 + 0.0096036) / 1.3841459 = 1.959964 * 0.1600113 / 1.3841459 = 0.226578
    w = wilson_interval(8, 10)
    assert w.estimate == 0.8
    assert w.low == pytest.approx(0.716738 - 0.226578, abs=1e-5)  # 0.490160
    assert w.high == pytest.approx(0.716738 + 0.226578, abs=1e-5)  # 0.943316


def test_wilson_interval_edges_none_passed_all_passed_and_empty():
    # k = 0, n = 10: centre = 0.1920730 / 1.3841459 = 0.138767 and half is the same, so
    # high = 2 * 0.138767 = 0.277533 and low is exactly 0
    none = wilson_interval(0, 10)
    assert (none.estimate, none.low) == (0.0, 0.0) and none.high == pytest.approx(0.277533, abs=1e-5)
    # k = n is the mirror image: low = 1 - 0.277533, high exactly 1
    every = wilson_interval(10, 10)
    assert every.high == 1.0 and every.low == pytest.approx(1 - 0.277533, abs=1e-5)
    # n = 0: nothing to estimate
    empty = wilson_interval(0, 0)
    assert (empty.estimate, empty.low, empty.high) == (None, None, None)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_exact_binomial_and_mcnemar():
    # b = 1 regressed, c = 6 fixed, n = 7: P(X <= 1) = (C(7,0) + C(7,1)) / 2^7 = 8/128, p = 2 * 8/128 = 0.125
    m = mcnemar_exact(regressed=1, fixed=6, both_passed=10, both_failed=3)
    assert m.p_value == pytest.approx(0.125) and m.direction == "better" and m.pairs == 20
    # b = 0, c = 6: p = 2 * 1/64 = 0.03125 (significant at 0.05); b = 0, c = 5: p = 2/32 = 0.0625 (not)
    assert mcnemar_exact(6, 0).p_value == pytest.approx(0.03125) and mcnemar_exact(6, 0).direction == "worse"
    assert mcnemar_exact(0, 5).p_value == pytest.approx(0.0625)
    # b = c = 3: 2 * (1 + 6 + 15 + 20)/64 = 1.3125, capped at 1
    assert mcnemar_exact(3, 3).p_value == 1.0 and mcnemar_exact(3, 3).direction == "none"
    # no discordant pairs (all tests agree, or n = 0): no evidence, p = 1
    assert mcnemar_exact(0, 0, both_passed=50).p_value == 1.0
    assert binomial_two_sided(0, 0) == 1.0


def test_fisher_exact_worked_tables():
    # [[3,0],[0,3]]: margins 3/3 of 6; hypergeometric weights C(3,x)C(3,3-x) = 1, 9, 9, 1 of C(6,3) = 20;
    # tables as unlikely as the observed (weight 1): x = 0 and x = 3 -> 2/20
    assert fisher_exact(3, 0, 0, 3) == pytest.approx(0.1)
    # [[5,0],[0,5]]: weights 1, 25, 100, 100, 25, 1 of 252 -> 2/252
    assert fisher_exact(5, 0, 0, 5) == pytest.approx(2 / 252)
    # [[4,1],[1,4]]: observed weight 25 -> (1 + 25 + 25 + 1)/252
    assert fisher_exact(4, 1, 1, 4) == pytest.approx(52 / 252)
    # [[5,0],[2,3]]: row 5, column 7 of 10; x = 2..5 weighs 10, 50, 50, 10 of C(10,7) = 120 -> 20/120
    assert fisher_exact(5, 0, 2, 3) == pytest.approx(20 / 120)
    # identical sides: p = 1; empty table: 1
    assert fisher_exact(2, 1, 2, 1) == pytest.approx(1.0) and fisher_exact(0, 0, 0, 0) == 1.0


def test_bootstrap_worked_examples():
    # deltas [0, 1]: a resample's mean is 0, 0.5 or 1 with probability 1/4, 1/2, 1/4, so the 2.5% and
    # 97.5% points are 0 and 1
    two = paired_bootstrap([0.0, 1.0], seed=1)
    assert (two.estimate, two.low, two.high) == (0.5, 0.0, 1.0) and two.resamples == 10_000
    # deltas [0, 0, 0, 1]: the mean is k/4 with k ~ Binomial(4, 1/4); P(k = 0) = 0.316 > 0.025 so low = 0;
    # P(k = 4) = 0.0039 < 0.025 < P(k >= 3) = 0.0508, so high = 3/4
    four = paired_bootstrap([0.0, 0.0, 0.0, 1.0], seed=7)
    assert (four.estimate, four.low, four.high) == (0.25, 0.0, 0.75)
    # every delta equal: no spread at all
    same = paired_bootstrap([0.2] * 5)
    assert same.low == pytest.approx(0.2) and same.high == pytest.approx(0.2)
    # n = 0: nothing to estimate
    empty = paired_bootstrap([])
    assert (empty.estimate, empty.low, empty.high, empty.n) == (None, None, None, 0)


def test_bootstrap_is_reproducible_and_matches_the_normal_approximation():
    rng = random.Random(3)
    deltas = [rng.gauss(0.1, 0.3) for _ in range(400)]
    a, b = paired_bootstrap(deltas, seed=11), paired_bootstrap(deltas, seed=11)
    assert (a.low, a.high) == (b.low, b.high)
    assert paired_bootstrap(deltas, seed=12).low != a.low
    # large n: the interval approaches mean +- 1.96 * sd / sqrt(n)
    mean = sum(deltas) / len(deltas)
    sd = (sum((d - mean) ** 2 for d in deltas) / (len(deltas) - 1)) ** 0.5
    half = Z * sd / len(deltas) ** 0.5
    assert a.low == pytest.approx(mean - half, abs=0.2 * half)
    assert a.high == pytest.approx(mean + half, abs=0.2 * half)


def test_exact_binomial_matches_its_definition_at_every_k():
    import math
    from fractions import Fraction

    n = 301
    for k in range(n + 1):
        tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1))
        assert binomial_two_sided(k, n) == float(min(Fraction(1), Fraction(2 * tail, 2**n))), k
    # many discordant pairs stay exact: 4,900 of 10,000 is z = -2.0 (normal p = 0.0455, exact a little above)
    assert binomial_two_sided(4_900, 10_000) == pytest.approx(0.04658, abs=2e-4)
