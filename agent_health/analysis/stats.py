"""Statistics for comparing two evaluation runs: how sure can we be that a change is real?

Pure functions over counts and numbers, exact where an exact answer is cheap:

- `wilson_interval`: a pass rate's confidence interval (good at small n and near 0 or 1, where
  the normal approximation gives impossible bounds);
- `mcnemar_exact`: paired significance of pass/fail changes over the tests both sides ran (two-sided
  binomial test on the discordant pairs, so it is exact at any n);
- `fisher_exact`: two-sided Fisher exact test of two pass counts, which decides whether one test's
  flip between epochs-runs lies within its trials' noise;
- `paired_bootstrap`: a seeded, reproducible percentile interval of a mean paired difference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from statistics import NormalDist
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from agent_health.lazy import deferred

if TYPE_CHECKING:
    import numpy as np
else:
    np = deferred("numpy")  # only commands that compare pay for the import


def z_value(confidence: float) -> float:
    """The two-sided normal quantile for `confidence` (0.95 -> 1.959964)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


class Interval(BaseModel):
    """A point estimate with its confidence interval; all None when there is nothing to estimate."""

    model_config = ConfigDict(frozen=True)

    estimate: float | None = Field(None, description="The point estimate.")
    low: float | None = Field(None, description="Lower bound of the interval.")
    high: float | None = Field(None, description="Upper bound of the interval.")
    confidence: float = Field(0.95, description="Confidence level of the interval.")


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """Wilson score interval of a proportion `successes / n`; empty (all None) when n = 0."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return Interval(confidence=confidence)
    z = z_value(confidence)
    p = successes / n
    z2n = z * z / n
    centre = (p + z2n / 2) / (1 + z2n)
    half = z * math.sqrt(p * (1 - p) / n + z2n / (4 * n)) / (1 + z2n)
    # exact 0 and 1 at the edges (k = 0 or k = n), not 1e-17 either side of them
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(estimate=p, low=low, high=high, confidence=confidence)


def binomial_two_sided(k: int, n: int) -> float:
    """Two-sided exact binomial p-value of `k` successes in `n` fair trials (p = 1/2):
    2 * P(X <= min(k, n - k)), capped at 1. n = 0 gives 1 (no evidence at all)."""
    if n == 0:
        return 1.0
    # Each binomial coefficient from the one before (C(n, i+1) = C(n, i) * (n-i) / (i+1), exact in
    # integers): linear in the tail's length, where computing each C(n, i) afresh was quadratic
    # (a comparison of 20,000 discordant pairs took minutes).
    term = tail = 1
    for i in range(min(k, n - k)):
        term = term * (n - i) // (i + 1)
        tail += term
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


class McNemar(BaseModel):
    """Paired pass/fail changes over the tests both sides graded, and their exact significance."""

    model_config = ConfigDict(frozen=True)

    pairs: int = Field(0, description="Tests both sides graded (errored on either side left out).")
    both_passed: int = 0
    both_failed: int = 0
    regressed: int = Field(0, description="Discordant pairs: passed on the baseline, failed on the candidate.")
    fixed: int = Field(0, description="Discordant pairs: failed on the baseline, passed on the candidate.")
    p_value: float = Field(1.0, description="Exact two-sided McNemar p-value (binomial on the discordant pairs).")
    direction: str = Field("none", description="worse (more regressed than fixed), better, or none.")


def mcnemar_exact(regressed: int, fixed: int, both_passed: int = 0, both_failed: int = 0) -> McNemar:
    """Exact McNemar test: under no change, each discordant pair is equally likely either way."""
    return McNemar(
        pairs=regressed + fixed + both_passed + both_failed,
        both_passed=both_passed,
        both_failed=both_failed,
        regressed=regressed,
        fixed=fixed,
        p_value=binomial_two_sided(regressed, regressed + fixed),
        direction="worse" if regressed > fixed else "better" if fixed > regressed else "none",
    )


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided Fisher exact p-value of the 2x2 table [[a, b], [c, d]] (rows: the two sides,
    columns: passed, failed): the probability, with the margins fixed, of a table no more likely
    than the one observed."""
    if min(a, b, c, d) < 0:
        raise ValueError("table counts must be >= 0")
    row1, col1, n = a + b, a + c, a + b + c + d
    if n == 0:
        return 1.0
    lo, hi = max(0, col1 - (n - row1)), min(row1, col1)
    total = math.comb(n, col1)

    def weight(x: int) -> int:  # hypergeometric probability of a = x, times C(n, col1)
        return math.comb(row1, x) * math.comb(n - row1, col1 - x)

    # Integer weights compare exactly: tables as likely as the observed one all count, which a
    # floating-point sum would need a tolerance for.
    observed = weight(a)
    tail = sum(w for w in (weight(x) for x in range(lo, hi + 1)) if w <= observed)
    return float(min(Fraction(1), Fraction(tail, total)))


class BootstrapInterval(Interval):
    """A mean paired difference with its percentile bootstrap interval."""

    n: int = Field(0, description="Pairs resampled.")
    resamples: int = Field(0, description="Bootstrap resamples drawn.")
    seed: int = Field(0, description="Seed of the resampling (same seed, same interval).")


def paired_bootstrap(
    deltas: Sequence[float], *, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> BootstrapInterval:
    """Percentile bootstrap interval of the mean of paired differences (`candidate - baseline` per
    test). Resamples tests with replacement; the same seed gives the same interval."""
    n = len(deltas)
    if n == 0 or resamples < 1:
        return BootstrapInterval(confidence=confidence, n=n, resamples=0, seed=seed)
    values = np.asarray(deltas, dtype=float)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    # Chunks keep the index matrix near 4 MB whatever the number of tests.
    chunk = max(1, 500_000 // n)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = values[idx].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return BootstrapInterval(
        estimate=float(values.mean()),
        low=float(low),
        high=float(high),
        confidence=confidence,
        n=n,
        resamples=resamples,
        seed=seed,
    )
