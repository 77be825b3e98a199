"""A trial's status, score and error in one pass (`outcome_of`, and `status_of`, `score_of` and
`first_failure`, which share its walk): the same values as the rules of agent_health.engine.scoring's
docstring, written here as three plain functions (the engine's own before the one pass), on any
signals."""

from __future__ import annotations

import itertools
import random
from statistics import fmean

import pytest

from agent_health.engine.scoring import first_failure, outcome_of, score_of, status_of
from agent_health.model import Signal


def status_spec(signals: tuple[Signal, ...], infra_error: str | None = None) -> str:
    if infra_error or any(s.errored for s in signals):
        return "errored"
    if any(s.role == "gate" and s.kind != "metric" and s.passed is False and not s.skipped for s in signals):
        return "failed"
    return "passed"


def score_spec(signals: tuple[Signal, ...]) -> float | None:
    values = [
        s.score if s.score is not None else (1.0 if s.passed else 0.0)
        for s in signals
        if not (s.kind == "metric" or s.skipped or s.errored or (s.passed is None and s.score is None))
    ]
    return round(fmean(values), 4) if values else None


def first_failure_spec(signals: tuple[Signal, ...]) -> str | None:
    for s in signals:
        if s.errored:
            return s.reasoning
        if s.role == "gate" and s.passed is False and not s.skipped:
            return f"{s.name}: {s.reasoning}" if s.reasoning else s.name
    return None


def _defined(signals: tuple[Signal, ...], infra: str | None) -> tuple[str, float | None, str | None]:
    status = status_spec(signals, infra)
    return status, None if status == "errored" else score_spec(signals), infra or first_failure_spec(signals)


def _signal(rng: random.Random, n: int) -> Signal:
    return Signal(
        kind=rng.choice(["deterministic", "judge", "metric"]),
        role=rng.choice(["gate", "observe"]),
        name=f"s{n}",
        passed=rng.choice([True, False, None]),
        score=rng.choice([None, 0.0, 0.25, 1.0, 0.33333]),
        reasoning=rng.choice([None, "", "why"]),
        skipped=rng.random() < 0.2,
        errored=rng.random() < 0.15,
    )


@pytest.mark.parametrize("seed", range(40))
def test_one_pass_gives_what_the_three_functions_give(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        signals = tuple(_signal(rng, n) for n in range(rng.randint(0, 5)))
        for infra in (None, "", "agent down"):
            assert outcome_of(signals, infra) == _defined(signals, infra), (signals, infra)
            assert status_of(signals, infra) == status_spec(signals, infra)
        assert score_of(signals) == score_spec(signals)
        assert first_failure(signals) == first_failure_spec(signals)
        assert status_of(iter(signals)) == status_spec(signals)  # any iterable, walked once


def test_the_usual_outcomes() -> None:
    ok = Signal(kind="deterministic", name="a", passed=True, score=1.0)
    bad = Signal(kind="deterministic", name="b", passed=False, score=0.0, reasoning="no tool")
    judged = Signal(kind="judge", name="j", passed=True, score=0.5)
    broken = Signal(kind="judge", name="k", errored=True, reasoning="judge down")
    gated_metric = Signal(kind="metric", name="m", passed=False, value=3.0)
    assert outcome_of((ok,)) == ("passed", 1.0, None)
    assert outcome_of((ok, bad)) == ("failed", 0.5, "b: no tool")
    assert outcome_of((ok, judged)) == ("passed", 0.75, None)
    assert outcome_of((bad, broken)) == ("errored", None, "b: no tool")
    assert outcome_of((broken, bad)) == ("errored", None, "judge down")
    assert outcome_of((), "setup failed") == ("errored", None, "setup failed")
    # a failing metric gates nothing, yet names the failure, as the three functions do
    assert outcome_of((gated_metric, ok)) == ("passed", 1.0, "m") == _defined((gated_metric, ok), None)
    for signals in itertools.permutations((ok, bad, judged, broken, gated_metric), 3):
        assert outcome_of(signals) == _defined(signals, None)
