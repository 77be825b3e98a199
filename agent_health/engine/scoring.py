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


def status_of(signals: Iterable[Signal], infra_error: str | None = None) -> str:
    signals = list(signals)
    if infra_error or any(s.errored for s in signals):
        return "errored"
    if any(s.role == "gate" and s.kind != "metric" and s.passed is False and not s.skipped for s in signals):
        return "failed"
    return "passed"


def score_of(signals: Iterable[Signal]) -> float | None:
    values = []
    for s in signals:
        if s.kind == "metric" or s.skipped or s.errored or (s.passed is None and s.score is None):
            continue
        values.append(s.score if s.score is not None else (1.0 if s.passed else 0.0))
    if len(values) == 1:  # most tests: one expectation or one judge (fmean of one value is that value)
        return round(values[0], 4)
    return round(fmean(values), 4) if values else None


def outcome_of(signals: Sequence[Signal], infra_error: str | None = None) -> tuple[str, float | None, str | None]:
    """A trial's (status, score, error) in one pass over its signals: `status_of`, then `score_of`
    (None when errored), then `infra_error` or else `first_failure`, the same values as those
    three calls (each walked the signals again, reading each signal's fields through pydantic's
    attribute hook)."""
    errored = bool(infra_error)
    failed = found = False
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
    if errored:
        return "errored", None, infra_error or failure
    if len(values) == 1:
        mean: float | None = round(values[0], 4)
    else:
        mean = round(fmean(values), 4) if values else None
    return ("failed" if failed else "passed"), mean, infra_error or failure


def evaluation_type(signals: Iterable[Signal]) -> str:
    return evaluation_type_of({s.kind for s in signals if not s.skipped})


def evaluation_type_of(kinds: set[str]) -> str:
    """The evaluation type of a test whose non-skipped signals were of these kinds."""
    if "judge" in kinds:
        return "hybrid" if "deterministic" in kinds else "agentic"
    return "deterministic"


def first_failure(signals: Iterable[Signal]) -> str | None:
    for s in signals:
        if s.errored:
            return s.reasoning
        if s.role == "gate" and s.passed is False and not s.skipped:
            return f"{s.name}: {s.reasoning}" if s.reasoning else s.name
    return None


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
