"""Status, score and evaluation type: pure functions of the signals a test produced.

- status: `errored` when any signal errored or infrastructure broke; otherwise `failed` when a
  gate signal failed; otherwise `passed`. Observe and skipped signals never gate.
- score: the mean over non-skipped, non-errored expectation and judge signals (gate and observe)
  of their score (an expectation scores 1 or 0; a judge its verdict score, else 1 or 0). Metric
  signals do not count. None when there is nothing to score.
- evaluation type: `agentic` when only judges produced signals, `hybrid` when judges and
  expectations did, `deterministic` otherwise.
- epochs: the test is `passed` when every non-errored trial passed, `failed` when any failed,
  `errored` only when every trial errored; pass@k = any trial passed, pass^k = all passed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from statistics import fmean

from agent_health.model import Signal, TrialResult


def _walk(signals: Iterable[Signal]) -> tuple[bool, bool, str | None, list[float]]:
    """One pass over the signals (each field read once: a model's attribute read goes through
    pydantic's hook): whether one errored, whether a gate failed, the first failure's text (an
    errored signal's reasoning, or a failed gate's name and reasoning; None when none, or when
    the first had no reasoning), and the scores that count."""
    errored = failed = found = False
    failure: str | None = None
    values: list[float] = []
    for s in signals:
        kind, passed, skipped, score = s.kind, s.passed, s.skipped, s.score
        if s.errored:
            errored = True
            if not found:
                found, failure = True, s.reasoning
            continue
        if passed is False and not skipped and s.role == "gate":
            if not found:
                reasoning = s.reasoning
                found, failure = True, f"{s.name}: {reasoning}" if reasoning else s.name
            if kind != "metric":
                failed = True
        if kind == "metric" or skipped or (passed is None and score is None):
            continue
        values.append(score if score is not None else (1.0 if passed else 0.0))
    return errored, failed, failure, values


def _mean(values: list[float]) -> float | None:
    if len(values) == 1:  # most tests: one expectation or one judge (fmean of one value is that value)
        return round(values[0], 4)
    return round(fmean(values), 4) if values else None


def status_of(signals: Iterable[Signal], infra_error: str | None = None) -> str:
    errored, failed, _, _ = _walk(signals)
    return "errored" if infra_error or errored else "failed" if failed else "passed"


def score_of(signals: Iterable[Signal]) -> float | None:
    return _mean(_walk(signals)[3])


def first_failure(signals: Iterable[Signal]) -> str | None:
    return _walk(signals)[2]


def outcome_of(signals: Sequence[Signal], infra_error: str | None = None) -> tuple[str, float | None, str | None]:
    """A trial's (status, score, error) in one pass over its signals: `status_of`, then `score_of`
    (None when errored), then `infra_error` or else `first_failure`."""
    errored, failed, failure, values = _walk(signals)
    if infra_error or errored:
        return "errored", None, infra_error or failure
    return ("failed" if failed else "passed"), _mean(values), failure


def evaluation_type(signals: Iterable[Signal]) -> str:
    return evaluation_type_of({s.kind for s in signals if not s.skipped})


def evaluation_type_of(kinds: set[str]) -> str:
    """The evaluation type of a test whose non-skipped signals were of these kinds."""
    if "judge" in kinds:
        return "hybrid" if "deterministic" in kinds else "agentic"
    return "deterministic"


def combine_trials(trials: Sequence[TrialResult]) -> dict[str, object]:
    """Aggregate status and pass@k / pass^k / flaky over epochs."""
    tally = TrialTally()
    for t in trials:
        tally.add(t)
    return tally.combined()


class TrialTally:
    """`combine_trials` folded one trial at a time: counts and sums, not the trials, so memory
    stays flat in the number of epochs. Also keeps the first error of each status (the result's
    error is the first trial with the combined status)."""

    def __init__(self) -> None:
        self.count = 0
        self.counts = {"passed": 0, "failed": 0, "errored": 0}
        self.score_sum = 0.0
        self.scored = 0
        self.first_error: dict[str, str | None] = {}

    def add(self, trial: TrialResult) -> None:
        self.count += 1
        self.counts[trial.status] += 1
        if trial.score is not None:
            self.score_sum += trial.score
            self.scored += 1
        self.first_error.setdefault(trial.status, trial.error)

    def combined(self) -> dict[str, object]:
        ran = self.counts["passed"] + self.counts["failed"]
        passed = self.counts["passed"]
        if not ran:
            status = "errored"
        elif passed == ran:
            status = "passed"
        else:
            status = "failed"
        return {
            "status": status,
            "score": round(self.score_sum / self.scored, 4) if self.scored else None,
            "pass_at_k": (1.0 if passed else 0.0) if ran else None,
            "pass_hat_k": (1.0 if passed == self.count else 0.0) if ran else None,
            "flaky": sum(1 for n in self.counts.values() if n) > 1,
        }
