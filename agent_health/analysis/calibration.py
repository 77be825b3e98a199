"""Judge calibration: stored verdicts against human labels, per judge identity and criterion.

A label matches a verdict when the test id is the same, its agent version and/or run id are the
result's, and its criterion (when given) and judge key (when given) are the verdict's. Every
matched label-verdict pair is one comparison; positive means pass.

Cohen's kappa and its 95% interval come from statsmodels (`cohens_kappa`: the asymptotic variance
of Fleiss, Cohen and Everitt 1969, the interval clipped to [-1, 1]); kappa is undefined (None)
when judge and human both answered one class only, where chance agreement is 1.
"""

from __future__ import annotations

import ast
import math
import time
import warnings
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from agent_health.lazy import deferred
from agent_health.model import JudgeIdentity, Signal, TestResult
from agent_health.model.calibration import Calibration, Confusion, Disagreement, Label, judge_key

# kappa's interval (statsmodels, numpy) loads when judges are calibrated
if TYPE_CHECKING:
    import numpy as np
    import statsmodels.stats.inter_rater as inter_rater
else:
    np = deferred("numpy")
    inter_rater = deferred("statsmodels.stats.inter_rater")


__all__ = [
    "CalibrationReport",
    "Pair",
    "calibrate",
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


def kappa_interval(confusion: Confusion) -> tuple[float | None, float | None, float | None]:
    """Cohen's kappa with its 95% interval (statsmodels), or Nones when kappa is undefined."""
    if confusion.n == 0:
        return None, None, None
    # rows: the human (pass, fail); columns: the judge (pass, fail)
    table = np.array([[confusion.tp, confusion.fn], [confusion.fp, confusion.tn]], dtype=float)
    with warnings.catch_warnings():  # 0/0 when both answered one class: reported as None below
        warnings.simplefilter("ignore", RuntimeWarning)
        res = inter_rater.cohens_kappa(table)
    kappa = float(res.kappa)
    if math.isnan(kappa):
        return None, None, None
    low, high = float(res.kappa_low), float(res.kappa_upp)
    return kappa, max(-1.0, low), min(1.0, high)


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
