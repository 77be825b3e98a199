"""Cohen's kappa and its asymptotic 95% interval, computed in agent_health (statsmodels was a
dependency for this alone): against published worked examples, against an independent hand
formula on many random tables, and in the corner cases a judge calibration meets."""

from __future__ import annotations

import random

import pytest

from agent_health.analysis.calibration import Z_975, cohens_kappa, kappa_interval
from agent_health.model.calibration import Confusion
from tests.calibration.test_calibrate_cli import hand_kappa_interval


def test_fleiss_levin_paik_example_as_statpsych_documents_it():
    """statpsych's `ci.kappa` reference page (D. G. Bonett, https://dgbonett.github.io/statpsych/
    reference/ci.kappa.html; the method of Fleiss, Levin and Paik, Statistical Methods for Rates and
    Proportions, 3rd ed., Wiley 2003): `ci.kappa(.05, 31, 12, 4, 58)` returns for Cohen's kappa
    Estimate 0.6756757, SE 0.07344761, LL 0.5317210, UL 0.8196303."""
    got = cohens_kappa([[31, 12], [4, 58]])
    assert got is not None
    assert got.kappa == pytest.approx(0.6756757, abs=5e-8)
    assert got.se == pytest.approx(0.07344761, abs=5e-9)
    assert got.low == pytest.approx(0.5317210, abs=5e-8)
    assert got.high == pytest.approx(0.8196303, abs=5e-8)


def test_stata_kapci_example_to_full_precision():
    """Stata's `kapci` (analytical interval, Fleiss, Cohen and Everitt's variance) on a 2x2 table
    of 1,932 subjects, printed with `return list` in Statalist, December 2009
    (http://www.stata.com/statalist/archive/2009-12/msg00320.html): rows 1,395 118 / 261 158,
    r(kappa) = .3411969207847029, r(se) = .0262913719660408, 95% CI .2896667786271169 to
    .3927270629422889 (with r(z) = 1.959963984540054)."""
    got = cohens_kappa([[1395, 118], [261, 158]])
    assert got is not None
    assert got.kappa == pytest.approx(0.3411969207847029, abs=1e-15)
    assert got.se == pytest.approx(0.0262913719660408, abs=1e-15)
    assert got.low == pytest.approx(0.2896667786271169, abs=1e-15)
    assert got.high == pytest.approx(0.3927270629422889, abs=1e-15)


def test_sas_proc_freq_example_of_a_three_category_table():
    """SAS PROC FREQ's AGREE printout for the 3x3 table 0 4 1 / 0 8 0 / 0 1 5, as statsmodels'
    own tests quote it (statsmodels/stats/tests/test_inter_rater.py, TestUnweightedCohens):
    Kappa 0.4842, ASE 0.1380, 95% confidence limits 0.2137 and 0.7547."""
    got = cohens_kappa([[0, 4, 1], [0, 8, 0], [0, 1, 5]])
    assert got is not None
    assert [round(v, 4) for v in got] == [0.4842, 0.1380, 0.2137, 0.7547]


def test_the_hand_computed_example_of_the_calibration_docs():
    # po = 9/12 = 0.75; pe = (6*7 + 6*5) / 144 = 0.5; kappa = (0.75 - 0.5) / 0.5 = 0.5
    got = cohens_kappa([[5, 1], [2, 4]])
    assert got is not None and got.kappa == 0.5
    assert kappa_interval(Confusion(tp=5, fn=1, fp=2, tn=4)) == (got.kappa, got.low, got.high)
    assert (got.low, got.high) == pytest.approx((0.016862362310800683, 0.9831376376891994), abs=1e-15)


def test_matches_an_independent_hand_formula_on_random_tables():
    rng = random.Random(36)
    checked = 0
    for _ in range(3000):
        m = [[rng.randint(0, 40) for _ in range(2)] for _ in range(2)]
        got = cohens_kappa(m)
        if got is None or got.se == 0.0:
            continue
        # tests/calibration's hand formula: its own grouping of the same variance, z rounded to 1.959964
        k, _, high = hand_kappa_interval(m)
        assert got.kappa == pytest.approx(k, rel=1e-12, abs=1e-15), m
        assert got.se == pytest.approx((high - k) / 1.959964, rel=1e-12), m
        checked += 1
    assert checked > 2500


def test_the_interval_uses_the_975_percent_normal_point():
    from statistics import NormalDist

    assert abs(Z_975 - NormalDist().inv_cdf(0.975)) < 1e-15
    got = cohens_kappa([[20, 5], [10, 65]])
    assert got is not None
    assert got.high - got.kappa == pytest.approx(Z_975 * got.se, abs=1e-15)


def test_undefined_kappa_is_none():
    assert cohens_kappa([[0, 0], [0, 0]]) is None  # no comparisons
    assert cohens_kappa([[7, 0], [0, 0]]) is None  # both answered pass only: chance agreement 1
    assert cohens_kappa([[0, 0], [0, 3]]) is None
    assert kappa_interval(Confusion()) == (None, None, None)
    assert kappa_interval(Confusion(tn=4)) == (None, None, None)


def test_perfect_agreement_and_one_sided_raters_have_no_spread():
    # A variance that is zero in exact arithmetic and a rounding error below zero in floating point
    # is zero: statsmodels gave NaN there, which the old code turned into [-1, 1] for some tables
    # and [0, 0] for others of the same shape.
    for m in ([[5, 0], [0, 7]], [[1, 0], [0, 2]], [[0, 5], [5, 0]]):
        got = cohens_kappa(m)
        assert got is not None and got.se == 0.0 and got.low == got.kappa == got.high, m
    assert kappa_interval(Confusion(tp=5, tn=7)) == (1.0, 1.0, 1.0)
    for c in (Confusion(tp=33, fp=8), Confusion(tp=10, fn=3), Confusion(fp=2, tn=39)):
        assert kappa_interval(c) == (0.0, 0.0, 0.0), c  # the judge (or the human) answered one class only


def test_the_calibration_interval_is_clipped_to_the_range_of_kappa():
    got = cohens_kappa([[3, 0], [1, 3]])
    assert got is not None and got.high > 1.0
    assert kappa_interval(Confusion(tp=3, fn=0, fp=1, tn=3)) == (got.kappa, got.low, 1.0)
    got = cohens_kappa([[1, 4], [4, 1]])
    assert got is not None and got.low < -1.0
    assert kappa_interval(Confusion(tp=1, fn=4, fp=4, tn=1)) == (got.kappa, -1.0, got.high)


def test_a_table_that_is_not_square_is_an_error():
    with pytest.raises(ValueError, match="square table"):
        cohens_kappa([[1, 2], [3]])


def test_a_calibration_loads_no_numerical_library():
    """The interval is plain Python: calibrating judges loads neither numpy nor statsmodels (a
    fresh interpreter, as `agent-health calibrate` starts)."""
    from tests.engine.test_import_cost import python

    out = python(
        "import sys\n"
        "from agent_health.analysis.calibration import kappa_interval\n"
        "from agent_health.model.calibration import Confusion\n"
        "print(kappa_interval(Confusion(tp=5, fn=1, fp=2, tn=4))[0])\n"
        "print(sorted(m for m in ('numpy', 'scipy', 'statsmodels', 'pandas') if m in sys.modules))\n"
    )
    assert out.stdout.split("\n")[:2] == ["0.5", "[]"], out.stdout + out.stderr
