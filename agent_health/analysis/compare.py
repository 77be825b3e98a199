"""Per-test comparison of a baseline against a candidate: flips, deltas and the statistics that
say whether a change is real (`compare_results`, the one function the CLI, the HTML comparison
page and the Dagster comparison and `no_regression` check share)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from agent_health.analysis.stats import (
    BootstrapInterval,
    Interval,
    McNemar,
    fisher_exact,
    mcnemar_exact,
    paired_bootstrap,
    wilson_interval,
)
from agent_health.errors import ConfigError
from agent_health.model import TestResult
from agent_health.stores.summary import ResultSummary

AnyResult = TestResult | ResultSummary

Flip = Literal["regressed", "fixed", "noise", "newly_errored", "recovered", "added", "removed", "same"]

NOISE_RULE = (
    "A pass/fail flip of a test run with epochs (more than one graded trial on either side) is noise "
    "when a two-sided Fisher exact test of the two sides' trial pass counts gives p >= alpha; "
    "a test run once per side cannot show noise and its flip counts as it is."
)


def _flip(base: AnyResult | None, cand: AnyResult | None) -> Flip:
    if base is None:
        return "added"
    if cand is None:
        return "removed"
    if base.status == cand.status:
        return "same"
    if cand.status == "errored":
        return "newly_errored"
    if base.status == "errored":
        return "recovered"
    return "regressed" if cand.status == "failed" else "fixed"


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


class TrialCounts(BaseModel):
    """A test's own pass rate over its graded trials (one trial without epochs)."""

    model_config = ConfigDict(frozen=True)

    passed: int = Field(description="Trials that passed.")
    graded: int = Field(description="Trials that passed or failed (errored trials left out).")
    pass_rate: Interval = Field(description="passed / graded with its Wilson interval.")


def trial_counts(result: AnyResult, confidence: float = 0.95) -> TrialCounts:
    """Passed and graded trials of one result: its trials with epochs, else the result itself."""
    counts = result.trial_counts
    if counts is None:  # results stored before trials were counted kept every trial
        statuses = [t.status for t in result.trials] or [result.status]
        counts = {s: statuses.count(s) for s in ("passed", "failed")}
    passed = counts.get("passed", 0)
    return _trial_counts(passed, passed + counts.get("failed", 0), confidence)


@functools.lru_cache(maxsize=4096)
def _trial_counts(passed: int, graded: int, confidence: float) -> TrialCounts:
    # Frozen, and the same few counts over and over (one trial: 1 of 1 or 0 of 1): made once each,
    # which took a comparison of 50,000 tests from 100,000 interval computations to a handful.
    return TrialCounts(passed=passed, graded=graded, pass_rate=wilson_interval(passed, graded, confidence))


class TestDelta(BaseModel):
    """One test in both runs. Deltas are candidate minus baseline."""

    model_config = ConfigDict(frozen=True)
    __test__ = False

    test_id: str
    suite: str
    baseline_status: str | None = None
    candidate_status: str | None = None
    flip: Flip = Field(
        description="regressed (pass->fail), fixed (fail->pass), noise (a pass/fail flip within its trials' "
        "noise), newly_errored, recovered (errored->graded), added, removed or same."
    )
    noise_of: Literal["regressed", "fixed"] | None = Field(
        None, description="For a noise flip: the status change that lies within the noise."
    )
    flip_p_value: float | None = Field(
        None, description="Fisher exact p-value of a pass/fail flip between epochs runs (see NOISE_RULE)."
    )
    baseline_trials: TrialCounts | None = None
    candidate_trials: TrialCounts | None = None
    baseline_score: float | None = None
    candidate_score: float | None = None
    score_delta: float | None = None
    cost_delta_usd: float | None = None
    latency_delta_ms: float | None = None
    tokens_delta: int | None = None
    content_changed: bool = Field(False, description="The test definition differs between the two results.")


class PassRate(Interval):
    """One side's pass rate over its graded tests, with its Wilson interval."""

    passed: int = 0
    graded: int = Field(0, description="passed + failed (errored tests left out).")


class ComparisonStats(BaseModel):
    """Is the difference real? Pass rates with intervals, paired significance, score delta interval."""

    model_config = ConfigDict(frozen=True)

    alpha: float = Field(0.05, description="Significance level.")
    baseline_pass_rate: PassRate
    candidate_pass_rate: PassRate
    mcnemar: McNemar = Field(description="Exact McNemar test over the tests both sides graded.")
    significant: bool = Field(description="mcnemar.p_value < alpha.")
    score_delta: BootstrapInterval = Field(
        description="Mean per-test score delta over tests both sides scored, with a paired bootstrap interval."
    )
    noise_rule: str = NOISE_RULE


class Comparison(BaseModel):
    """Baseline vs candidate over the tests either ran (JSON-serializable with `model_dump`)."""

    model_config = ConfigDict(frozen=True)

    baseline: str
    candidate: str
    tests: list[TestDelta] = Field(default_factory=list, description="Every test, flips first.")
    baseline_pass_rate: float | None = None
    candidate_pass_rate: float | None = None
    pass_rate_delta: float | None = None
    mean_score_delta: float | None = Field(None, description="Mean of per-test score deltas.")
    cost_delta_usd: float | None = None
    latency_delta_ms: float | None = Field(None, description="Sum of per-test duration deltas.")
    stats: ComparisonStats | None = Field(None, description="Statistics of the difference.")

    @property
    def regressions(self) -> list[TestDelta]:
        """Tests that passed in the baseline and fail or error in the candidate (noise excluded)."""
        return [
            t
            for t in self.tests
            if t.flip == "regressed" or (t.flip == "newly_errored" and t.baseline_status == "passed")
        ]

    @property
    def fixes(self) -> list[TestDelta]:
        return [t for t in self.tests if t.flip == "fixed"]

    @property
    def noise(self) -> list[TestDelta]:
        """Pass/fail flips that lie within their trials' noise."""
        return [t for t in self.tests if t.flip == "noise"]

    @computed_field(description="How many tests had each flip.")  # type: ignore[prop-decorator]
    @property
    def flip_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tests:
            out[t.flip] = out.get(t.flip, 0) + 1
        return out

    @computed_field(description="Ids of regressed tests (noise excluded), what `--fail-on regression` fails on.")  # type: ignore[prop-decorator]
    @property
    def regressed_tests(self) -> list[str]:
        return [t.test_id for t in self.regressions]

    @computed_field(description="The candidate is significantly worse: McNemar p < alpha, more regressed than fixed.")  # type: ignore[prop-decorator]
    @property
    def significant_regression(self) -> bool:
        return bool(self.stats and self.stats.significant and self.stats.mcnemar.direction == "worse")

    @computed_field(description="Tests with a result on both sides: the ones actually compared.")  # type: ignore[prop-decorator]
    @property
    def compared_tests(self) -> int:
        return sum(t.baseline_status is not None and t.candidate_status is not None for t in self.tests)

    @computed_field(description="Ids of candidate tests with no baseline result (flip added): not compared.")  # type: ignore[prop-decorator]
    @property
    def baseline_missing(self) -> list[str]:
        return [t.test_id for t in self.tests if t.baseline_status is None]

    @computed_field(description="How many candidate tests have no baseline result (flip added).")  # type: ignore[prop-decorator]
    @property
    def baseline_missing_results(self) -> int:
        return len(self.baseline_missing)

    @computed_field(description="Ids of baseline tests with no candidate result (flip removed): not compared.")  # type: ignore[prop-decorator]
    @property
    def candidate_missing(self) -> list[str]:
        return [t.test_id for t in self.tests if t.candidate_status is None]

    @computed_field(description="How many baseline tests have no candidate result (flip removed).")  # type: ignore[prop-decorator]
    @property
    def candidate_missing_results(self) -> int:
        return len(self.candidate_missing)

    @computed_field(description="Every test has a result on both sides (nothing added or removed).")  # type: ignore[prop-decorator]
    @property
    def complete(self) -> bool:
        return self.compared_tests == len(self.tests)

    def coverage_line(self) -> str:
        """How much of the two sides was compared, in one sentence, so a partial comparison is
        never read as a whole one."""
        if self.complete:
            return f"complete: every one of the {len(self.tests)} test(s) has a result on both sides"
        gaps = [
            f"{n} {side} test(s) have no {other} result ({flip})"
            for n, side, other, flip in (
                (self.baseline_missing_results, "candidate", "baseline", "added"),
                (self.candidate_missing_results, "baseline", "candidate", "removed"),
            )
            if n
        ]
        return f"partial: {self.compared_tests} of {len(self.tests)} test(s) compared; {', '.join(gaps)}"

    def counts(self) -> dict[str, int]:
        return self.flip_counts

    def stats_summary(self) -> dict[str, float | int | bool | list[str] | None]:
        """The statistics as flat named values, exactly as `model_dump` holds them (what the Dagster
        comparison asset shows, so the UI and `agent-health compare --json` agree): each side's
        pass rate with its Wilson interval, the McNemar test, the bootstrap interval of the mean
        score delta, and the noise-filtered regressions."""
        s = self.stats
        if s is None:
            return {}
        out: dict[str, float | int | bool | list[str] | None] = {}
        for side, rate in (("baseline", s.baseline_pass_rate), ("candidate", s.candidate_pass_rate)):
            out |= {
                f"{side}_pass_rate": rate.estimate,
                f"{side}_pass_rate_low": rate.low,
                f"{side}_pass_rate_high": rate.high,
                f"{side}_graded": rate.graded,
            }
        m, d = s.mcnemar, s.score_delta
        return out | {
            "confidence": s.baseline_pass_rate.confidence,
            "alpha": s.alpha,
            "mcnemar_p": m.p_value,
            "mcnemar_pairs": m.pairs,
            "mcnemar_regressed": m.regressed,
            "mcnemar_fixed": m.fixed,
            "significant": s.significant,
            "significant_regression": self.significant_regression,
            "score_delta": d.estimate,
            "score_delta_low": d.low,
            "score_delta_high": d.high,
            "bootstrap_resamples": d.resamples,
            "bootstrap_seed": d.seed,
            "regressed_tests": self.regressed_tests,
            "noise_tests": [t.test_id for t in self.noise],
        }

    def to_markdown(self, limit: int = 50) -> str:
        lines = [
            f"### {self.baseline} -> {self.candidate}",
            "",
            f"pass rate {_p(self.baseline_pass_rate)} -> {_p(self.candidate_pass_rate)} "
            f"(delta {_f(self.pass_rate_delta)}), mean score delta {_f(self.mean_score_delta)}, "
            f"cost delta {_f(self.cost_delta_usd)} USD, latency delta {_f(self.latency_delta_ms)} ms",
        ]
        lines += ["", self.coverage_line()]
        if self.stats:
            lines += ["", self.stats_line()]
        lines += [
            "",
            "| test | flip | baseline | candidate | score delta | cost delta | latency delta ms |",
            "|---|---|---|---|---|---|---|",
        ]
        for t in self.tests[:limit]:
            lines.append(
                f"| `{t.test_id}` | {t.flip} | {t.baseline_status or '-'} | {t.candidate_status or '-'} "
                f"| {_f(t.score_delta)} | {_f(t.cost_delta_usd)} | {_f(t.latency_delta_ms)} |"
            )
        if len(self.tests) > limit:
            lines.append(f"| ... {len(self.tests) - limit} more | | | | | | |")
        return "\n".join(lines)

    def mcnemar_noise_note(self) -> str:
        """Why McNemar's regressed and fixed can exceed the flip counts (empty when they agree): it
        pairs each test's overall status, so a flip within its trials' noise counts there too."""
        counted = [
            f"{n} noise flip{'s' if n > 1 else ''} counted as {kind}"
            for kind in ("regressed", "fixed")
            if (n := sum(t.noise_of == kind for t in self.noise))
        ]
        if not counted:
            return ""
        return (
            f"{' and '.join(counted)} by McNemar, which pairs each test's overall status while the flip "
            "counts set apart flips within their trials' noise"
        )

    def stats_line(self) -> str:
        """The statistics in one sentence (empty without statistics)."""
        s = self.stats
        if s is None:
            return ""
        m, d = s.mcnemar, s.score_delta
        pct = f"{s.baseline_pass_rate.confidence:.0%}"
        note = self.mcnemar_noise_note()
        return (
            f"pass rate {_ci(s.baseline_pass_rate)} -> {_ci(s.candidate_pass_rate)} ({pct} Wilson); "
            f"McNemar exact p = {m.p_value:.4g} over {m.pairs} paired tests ({m.regressed} regressed, "
            f"{m.fixed} fixed{'; ' + note if note else ''}){' - significant' if s.significant else ''} "
            f"at alpha {s.alpha:g}; "
            f"mean score delta {_f(d.estimate)} [{_f(d.low)}, {_f(d.high)}] ({pct} paired bootstrap, "
            f"{d.resamples} resamples, seed {d.seed})"
        )


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _ci(rate: PassRate) -> str:
    if rate.estimate is None:
        return "- (no graded tests)"
    return f"{rate.estimate:.1%} [{rate.low:.1%}, {rate.high:.1%}] of {rate.graded}"


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4g}" if value < 0 or value > 0 else "0"


_ORDER = {
    "regressed": 0,
    "newly_errored": 1,
    "fixed": 2,
    "noise": 3,
    "recovered": 4,
    "added": 5,
    "removed": 6,
    "same": 7,
}


def _pass_rate(results: Iterable[AnyResult], confidence: float) -> PassRate:
    graded = [r for r in results if r.status != "errored"]
    passed = sum(r.status == "passed" for r in graded)
    ci = wilson_interval(passed, len(graded), confidence)
    return PassRate(**ci.model_dump(), passed=passed, graded=len(graded))


def _side_name(results: Iterable[AnyResult], fallback: str) -> str:
    agents = {r.agent for r in results}
    return agents.pop() if len(agents) == 1 else fallback


def _test_delta(tid: str, b: AnyResult | None, c: AnyResult | None, alpha: float, confidence: float) -> TestDelta:
    flip: Flip = _flip(b, c)
    noise_of = p_value = None
    bt = trial_counts(b, confidence) if b else None
    ct = trial_counts(c, confidence) if c else None
    if flip in ("regressed", "fixed") and bt and ct and max(bt.graded, ct.graded) > 1:
        p_value = fisher_exact(bt.passed, bt.graded - bt.passed, ct.passed, ct.graded - ct.passed)
        if p_value >= alpha:
            noise_of, flip = flip, "noise"
    return TestDelta(
        test_id=tid,
        suite=(c or b).suite,  # type: ignore[union-attr]
        baseline_status=b.status if b else None,
        candidate_status=c.status if c else None,
        flip=flip,
        noise_of=noise_of,
        flip_p_value=p_value,
        baseline_trials=bt,
        candidate_trials=ct,
        baseline_score=b.score if b else None,
        candidate_score=c.score if c else None,
        score_delta=_delta(b.score if b else None, c.score if c else None),
        cost_delta_usd=_delta(b.cost_usd if b else None, c.cost_usd if c else None),
        latency_delta_ms=_delta(b.duration_ms if b else None, c.duration_ms if c else None),
        tokens_delta=(c.usage.total_tokens - b.usage.total_tokens) if b and c else None,
        content_changed=bool(b and c and b.content_hash != c.content_hash),
    )


def compare_results(
    baseline: Iterable[AnyResult],
    candidate: Iterable[AnyResult],
    *,
    baseline_ref: str | None = None,
    candidate_ref: str | None = None,
    alpha: float = 0.05,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> Comparison:
    """Compare two sets of results matched by test id (one agent version each): per-test flips
    (noise-aware with epochs) and deltas, each side's pass rate with a Wilson interval, the exact
    McNemar test over the tests both graded, and the mean score delta with a seeded paired
    bootstrap interval. Pure: the same inputs and seed give the same Comparison."""
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must lie in (0, 1), got {alpha}")
    base = {r.test_id: r for r in baseline}
    cand = {r.test_id: r for r in candidate}
    rows = [_test_delta(tid, base.get(tid), cand.get(tid), alpha, confidence) for tid in sorted(set(base) | set(cand))]
    rows.sort(key=lambda t: (_ORDER[t.flip], -abs(t.score_delta or 0.0), t.test_id))
    both = [t for t in rows if t.baseline_status and t.candidate_status]
    score_deltas = [t.score_delta for t in both if t.score_delta is not None]
    costs = [t.cost_delta_usd for t in both if t.cost_delta_usd is not None]
    lat = [t.latency_delta_ms for t in both if t.latency_delta_ms is not None]
    graded = [t for t in both if "errored" not in (t.baseline_status, t.candidate_status)]

    def pairs(b: str, c: str) -> int:
        return sum(t.baseline_status == b and t.candidate_status == c for t in graded)

    mcnemar = mcnemar_exact(
        regressed=pairs("passed", "failed"),
        fixed=pairs("failed", "passed"),
        both_passed=pairs("passed", "passed"),
        both_failed=pairs("failed", "failed"),
    )
    bpr, cpr = _pass_rate(base.values(), confidence), _pass_rate(cand.values(), confidence)
    return Comparison(
        baseline=baseline_ref or _side_name(base.values(), "baseline"),
        candidate=candidate_ref or _side_name(cand.values(), "candidate"),
        tests=rows,
        baseline_pass_rate=bpr.estimate,
        candidate_pass_rate=cpr.estimate,
        pass_rate_delta=_delta(bpr.estimate, cpr.estimate),
        mean_score_delta=sum(score_deltas) / len(score_deltas) if score_deltas else None,
        cost_delta_usd=round(sum(costs), 8) if costs else None,
        latency_delta_ms=sum(lat) if lat else None,
        stats=ComparisonStats(
            alpha=alpha,
            baseline_pass_rate=bpr,
            candidate_pass_rate=cpr,
            mcnemar=mcnemar,
            significant=mcnemar.p_value < alpha,
            score_delta=paired_bootstrap(score_deltas, confidence=confidence, resamples=resamples, seed=seed),
        ),
    )


def compare(
    baseline: Iterable[AnyResult], candidate: Iterable[AnyResult], baseline_ref: str, candidate_ref: str
) -> Comparison:
    """`compare_results` with the two names given positionally (what the Dagster assets call)."""
    return compare_results(baseline, candidate, baseline_ref=baseline_ref, candidate_ref=candidate_ref)


def default_pair(versions: Sequence[str], baseline: str | None = None, candidate: str | None = None) -> tuple[str, str]:
    """Baseline and candidate: the given ones, else the two newest of `versions` (oldest first)."""
    if baseline and candidate:
        return baseline, candidate
    rest = [v for v in versions if v not in (baseline, candidate)]
    candidate = candidate or (rest.pop() if rest else None)
    baseline = baseline or (rest.pop() if rest else None)
    if not baseline or not candidate:
        raise ConfigError(
            f"comparison needs two agent versions; known: {', '.join(versions) or 'none'} (set baseline and candidate)"
        )
    return baseline, candidate
