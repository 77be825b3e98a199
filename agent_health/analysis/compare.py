"""Per-test comparison of a baseline agent version against a candidate: flips and deltas."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_health.errors import ConfigError
from agent_health.model import TestResult
from agent_health.stores.summary import ResultSummary

AnyResult = TestResult | ResultSummary

Flip = Literal["regressed", "fixed", "newly_errored", "recovered", "added", "removed", "same"]


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


class TestDelta(BaseModel):
    """One test in both versions. Deltas are candidate minus baseline."""

    model_config = ConfigDict(frozen=True)
    __test__ = False

    test_id: str
    suite: str
    baseline_status: str | None = None
    candidate_status: str | None = None
    flip: Flip = Field(
        description="regressed (pass->fail), fixed (fail->pass), newly_errored, recovered "
        "(errored->graded), added, removed or same."
    )
    baseline_score: float | None = None
    candidate_score: float | None = None
    score_delta: float | None = None
    cost_delta_usd: float | None = None
    latency_delta_ms: float | None = None
    tokens_delta: int | None = None
    content_changed: bool = Field(False, description="The test definition differs between the two results.")


class Comparison(BaseModel):
    """Baseline vs candidate over the tests either ran."""

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

    @property
    def regressions(self) -> list[TestDelta]:
        """Tests that passed in the baseline and fail or error in the candidate."""
        return [
            t
            for t in self.tests
            if t.flip == "regressed" or (t.flip == "newly_errored" and t.baseline_status == "passed")
        ]

    @property
    def fixes(self) -> list[TestDelta]:
        return [t for t in self.tests if t.flip == "fixed"]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tests:
            out[t.flip] = out.get(t.flip, 0) + 1
        return out

    def to_markdown(self, limit: int = 50) -> str:
        lines = [
            f"### {self.baseline} -> {self.candidate}",
            "",
            f"pass rate {_p(self.baseline_pass_rate)} -> {_p(self.candidate_pass_rate)} "
            f"(delta {_f(self.pass_rate_delta)}), mean score delta {_f(self.mean_score_delta)}, "
            f"cost delta {_f(self.cost_delta_usd)} USD, latency delta {_f(self.latency_delta_ms)} ms",
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


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4g}" if value < 0 or value > 0 else "0"


_ORDER = {"regressed": 0, "newly_errored": 1, "fixed": 2, "recovered": 3, "added": 4, "removed": 5, "same": 6}


def _pass_rate(results: Iterable[AnyResult]) -> float | None:
    graded = [r for r in results if r.status != "errored"]
    return sum(r.status == "passed" for r in graded) / len(graded) if graded else None


def compare(
    baseline: Iterable[AnyResult], candidate: Iterable[AnyResult], baseline_ref: str, candidate_ref: str
) -> Comparison:
    """Match results by test id; flips first, then by absolute score delta."""
    base = {r.test_id: r for r in baseline}
    cand = {r.test_id: r for r in candidate}
    rows: list[TestDelta] = []
    for tid in sorted(set(base) | set(cand)):
        b, c = base.get(tid), cand.get(tid)
        rows.append(
            TestDelta(
                test_id=tid,
                suite=(c or b).suite,  # type: ignore[union-attr]
                baseline_status=b.status if b else None,
                candidate_status=c.status if c else None,
                flip=_flip(b, c),
                baseline_score=b.score if b else None,
                candidate_score=c.score if c else None,
                score_delta=_delta(b.score if b else None, c.score if c else None),
                cost_delta_usd=_delta(b.cost_usd if b else None, c.cost_usd if c else None),
                latency_delta_ms=_delta(b.duration_ms if b else None, c.duration_ms if c else None),
                tokens_delta=(c.usage.total_tokens - b.usage.total_tokens) if b and c else None,
                content_changed=bool(b and c and b.content_hash != c.content_hash),
            )
        )
    rows.sort(key=lambda t: (_ORDER[t.flip], -abs(t.score_delta or 0.0), t.test_id))
    both = [t for t in rows if t.baseline_status and t.candidate_status]
    score_deltas = [t.score_delta for t in both if t.score_delta is not None]
    costs = [t.cost_delta_usd for t in both if t.cost_delta_usd is not None]
    lat = [t.latency_delta_ms for t in both if t.latency_delta_ms is not None]
    bpr, cpr = _pass_rate(base.values()), _pass_rate(cand.values())
    return Comparison(
        baseline=baseline_ref,
        candidate=candidate_ref,
        tests=rows,
        baseline_pass_rate=bpr,
        candidate_pass_rate=cpr,
        pass_rate_delta=_delta(bpr, cpr),
        mean_score_delta=sum(score_deltas) / len(score_deltas) if score_deltas else None,
        cost_delta_usd=round(sum(costs), 8) if costs else None,
        latency_delta_ms=sum(lat) if lat else None,
    )


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
