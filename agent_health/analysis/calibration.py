"""Judge calibration: stored verdicts against human labels, per judge identity and criterion.

A label matches a verdict when the test id is the same, its agent version and/or run id are the
result's, and its criterion (when given) and judge key (when given) are the verdict's. Every
matched label-verdict pair is one comparison; positive means pass.

Cohen's kappa and its 95% interval are computed here (`cohens_kappa`: the asymptotic variance of
Fleiss, Cohen and Everitt 1969, the interval clipped to [-1, 1]); kappa is undefined (None) when
judge and human both answered one class only, where chance agreement is 1.
"""

from __future__ import annotations

import ast
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from agent_health.model import JudgeIdentity, Signal, TestResult
from agent_health.model.calibration import Calibration, Confusion, Disagreement, Label, judge_key

__all__ = [
    "CalibrationReport",
    "Kappa",
    "Pair",
    "calibrate",
    "cohens_kappa",
    "criterion_of",
    "kappa_interval",
    "latest_calibrations",
    "match_labels",
]


def criterion_of(signal: Signal) -> str:
    """The claim a judge signal judged (its name is `judge('<claim>')`)."""
    name = signal.name
    if name.startswith("judge(") and name.endswith(")"):
        try:
            value = ast.literal_eval(name[len("judge(") : -1])
        except (ValueError, SyntaxError):
            return name
        if isinstance(value, str):
            return value
    return name


@dataclass(frozen=True)
class Pair:
    """One labelled verdict."""

    identity: JudgeIdentity
    key: str
    criterion: str
    result: TestResult
    judge_passed: bool
    reasoning: str
    label: Label


def _judged(result: TestResult) -> Iterable[tuple[Signal, JudgeIdentity, str]]:
    """Every graded judge verdict of a result with the judge identity it recorded."""
    for s in result.signals:
        if s.kind != "judge" or s.skipped or s.errored or s.passed is None:
            continue
        raw = (s.evidence or {}).get("provenance")
        if not isinstance(raw, dict):
            continue  # a verdict from before judges recorded who they were: no identity to calibrate
        identity = JudgeIdentity.model_validate(raw)
        yield s, identity, judge_key(identity)


def match_labels(results: Iterable[TestResult], labels: Sequence[Label]) -> tuple[list[Pair], list[Label]]:
    """Labelled verdicts, and the labels that matched no verdict."""
    by_test: dict[str, list[Label]] = defaultdict(list)
    for label in labels:
        by_test[label.test_id].append(label)
    pairs: list[Pair] = []
    used: set[int] = set()
    for result in results:
        candidates = [
            lab
            for lab in by_test.get(result.test_id, ())
            if (lab.agent is None or lab.agent == result.agent)
            and (lab.run_id is None or lab.run_id == result.eval_run_id)
        ]
        if not candidates:
            continue
        for signal, identity, key in _judged(result):
            criterion = criterion_of(signal)
            for lab in candidates:
                if (lab.criterion is None or lab.criterion == criterion) and (lab.judge is None or lab.judge == key):
                    used.add(id(lab))
                    pairs.append(
                        Pair(identity, key, criterion, result, bool(signal.passed), signal.reasoning or "", lab)
                    )
    return pairs, [lab for lab in labels if id(lab) not in used]


# The 97.5% point of the standard normal as scipy's `norm.isf(0.025)` gives it (statsmodels' factor;
# the exact quantile is 1.95996398454005424): the same double, so the intervals are the same.
Z_975 = 1.9599639845400545


class Kappa(NamedTuple):
    """Cohen's kappa, its asymptotic standard error and its 95% interval (not clipped)."""

    kappa: float
    se: float
    low: float
    high: float


def _total(values: Iterable[float]) -> float:
    """Left-to-right sum, as numpy sums fewer than eight numbers (Python 3.12's `sum` compensates)."""
    s = 0.0
    for v in values:
        s += v
    return s


def cohens_kappa(table: Sequence[Sequence[float]]) -> Kappa | None:
    """Cohen's kappa of a square table of counts (rows one rater, columns the other, in the same
    category order), with the large-sample standard error of Fleiss, Cohen and Everitt (1969) and
    the interval kappa +- 1.96 SE; None when kappa is undefined (no counts, or chance agreement 1:
    both raters used one and the same category).

    With p_ij the cell proportions, r_i and c_j the row and column margins, p_o = sum p_ii and
    p_e = sum r_i c_i: kappa = (p_o - p_e) / (1 - p_e) and

        var = [ sum_i p_ii (1 - (r_i + c_i)(1 - kappa))^2
                + (1 - kappa)^2 sum_{i != j} p_ij (c_i + r_j)^2
                - (kappa - p_e (1 - kappa))^2 ] / ((1 - p_e)^2 n)

    the variance statsmodels' `cohens_kappa` uses, in its order of operations: a 2x2 table gives
    the same doubles. A variance that rounding makes a hair below zero (perfect agreement) is 0.
    """
    k = len(table)
    if any(len(row) != k for row in table):
        raise ValueError(f"Cohen's kappa needs a square table of counts (got rows of {[len(r) for r in table]})")
    n = float(_total(_total(row) for row in table))
    if not n > 0:
        return None
    p = [[float(c) / n for c in row] for row in table]
    rows = [_total(row) / n for row in table]
    cols = [_total(row[j] for row in table) / n for j in range(k)]
    p_e = _total(cols[i] * rows[i] for i in range(k))
    if p_e == 1.0:
        return None
    kappa = (_total(float(table[i][i]) for i in range(k)) / n - p_e) / (1 - p_e)
    # statsmodels squares the per-cell factors as numpy squares an array (x * x) and the scalars
    # with pow (x ** 2); the two can differ in the last bit, so each is squared the same way here
    diag = [1 - (rows[i] + cols[i]) * (1 - kappa) for i in range(k)]
    term_a = _total(p[i][i] * (diag[i] * diag[i]) for i in range(k))
    margins = [[cols[i] + rows[j] for j in range(k)] for i in range(k)]
    off = _total(p[i][j] * (margins[i][j] * margins[i][j]) for i in range(k) for j in range(k) if i != j)
    term_b = (1 - kappa) ** 2 * off
    term_c = (kappa - p_e * (1 - kappa)) ** 2
    var = (term_a + term_b - term_c) / (1 - p_e) ** 2 / n
    se = math.sqrt(max(var, 0.0))
    return Kappa(kappa, se, kappa - Z_975 * se, kappa + Z_975 * se)


def kappa_interval(confusion: Confusion) -> tuple[float | None, float | None, float | None]:
    """Cohen's kappa of judge against human with its 95% interval clipped to [-1, 1], or Nones
    when kappa is undefined."""
    # rows: the human (pass, fail); columns: the judge (pass, fail)
    res = cohens_kappa([[confusion.tp, confusion.fn], [confusion.fp, confusion.tn]])
    if res is None:
        return None, None, None
    return res.kappa, max(-1.0, res.low), min(1.0, res.high)


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def _calibration(pairs: Sequence[Pair], criterion: str | None, source: str, now: float) -> Calibration:
    c = Confusion(
        tp=sum(p.judge_passed and p.label.passed for p in pairs),
        fp=sum(p.judge_passed and not p.label.passed for p in pairs),
        fn=sum(not p.judge_passed and p.label.passed for p in pairs),
        tn=sum(not p.judge_passed and not p.label.passed for p in pairs),
    )
    kappa, low, high = kappa_interval(c)
    return Calibration(
        judge_key=pairs[0].key,
        judge=pairs[0].identity,
        criterion=criterion,
        n=c.n,
        agreement=_rate(c.tp + c.tn, c.n),
        kappa=kappa,
        kappa_low=low,
        kappa_high=high,
        tpr=_rate(c.tp, c.tp + c.fn),
        tnr=_rate(c.tn, c.tn + c.fp),
        fpr=_rate(c.fp, c.fp + c.tn),
        fnr=_rate(c.fn, c.fn + c.tp),
        confusion=c,
        disagreements=tuple(
            Disagreement(
                test_id=p.result.test_id,
                agent=p.result.agent,
                criterion=p.criterion,
                judge_passed=p.judge_passed,
                human_passed=p.label.passed,
                judge_reasoning=p.reasoning,
                human_note=p.label.note,
                labeller=p.label.labeller,
            )
            for p in pairs
            if p.judge_passed != p.label.passed
        ),
        calibrated_at=now,
        source=source,
    )


class CalibrationReport(BaseModel):
    """What `agent-health calibrate` prints: one calibration per judge identity over every claim,
    then per claim with enough labels; and the labels that matched no stored verdict."""

    model_config = ConfigDict(frozen=True)

    source: str = Field(description="The results and labels compared.")
    labels: int = Field(description="Labels read.")
    calibrations: tuple[Calibration, ...] = Field((), description="Per judge, then per judge and criterion.")
    unmatched: tuple[Label, ...] = Field((), description="Labels that matched no graded, identified verdict.")
    min_criterion_labels: int = Field(description="Fewest comparisons a per-criterion row needs.")


def calibrate(
    results: Iterable[TestResult],
    labels: Sequence[Label],
    *,
    source: str = "",
    min_criterion_labels: int = 10,
    now: float | None = None,
) -> CalibrationReport:
    """Calibrate every judge identity with labelled verdicts among `results`."""
    now = time.time() if now is None else now
    pairs, unmatched = match_labels(results, labels)
    by_judge: dict[str, list[Pair]] = defaultdict(list)
    for p in pairs:
        by_judge[p.key].append(p)
    out: list[Calibration] = []
    for _key, judged in sorted(by_judge.items(), key=lambda kv: kv[1][0].identity.label):
        out.append(_calibration(judged, None, source, now))
        by_criterion: dict[str, list[Pair]] = defaultdict(list)
        for p in judged:
            by_criterion[p.criterion].append(p)
        if len(by_criterion) > 1:  # one claim only: its row would repeat the judge's
            for criterion, group in sorted(by_criterion.items()):
                if len(group) >= min_criterion_labels:
                    out.append(_calibration(group, criterion, source, now))
    return CalibrationReport(
        source=source,
        labels=len(labels),
        calibrations=tuple(out),
        unmatched=tuple(unmatched),
        min_criterion_labels=min_criterion_labels,
    )


def latest_calibrations(calibrations: Iterable[Calibration]) -> dict[str, Calibration]:
    """The newest whole-judge calibration (criterion None) per judge key."""
    latest: dict[str, Calibration] = {}
    for c in calibrations:
        if c.criterion is None and (c.judge_key not in latest or c.calibrated_at >= latest[c.judge_key].calibrated_at):
            latest[c.judge_key] = c
    return latest
