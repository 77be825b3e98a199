"""Judge calibration for a pipeline, one judge identity at a time.

`labelled_judges` finds the judge identities whose verdicts among the store's latest results have
human labels, each with a readable, stable key (`judge_partition_key`) and a digest of what its
calibration compares, so a transport can add a partition when an identity first appears and
recalibrate only the identities whose labelled verdicts changed. `calibrate_identities`
calibrates the identities asked for, stores their calibrations (the run's calibration gate reads
the newest) and gives each its figures and its `judges_calibrated` gate against
`judge.calibration`. Only the results of labelled tests are read."""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_health.analysis.calibration import Pair, calibrate, match_labels
from agent_health.model import JudgeIdentity, TestResult
from agent_health.model.calibration import Calibration, CalibrationGate, Label, judge_key
from agent_health.pipeline.gates import Gate
from agent_health.pipeline.tables import Column, Table, sig
from agent_health.stores import ResultStore

JUDGES_CALIBRATED = "judges_calibrated"  # the name of the check on each calibration partition

_UNSAFE = re.compile(r"[^A-Za-z0-9._:@+-]+")
_DOTS = re.compile(r"\.{2,}")  # '...' separates the ends of a partition range in Dagster
_READABLE_MAX = 80
_HASH = 8


def judge_partition_key(identity: JudgeIdentity) -> str:
    """A readable, stable key of a judge identity, valid as a partition key:
    `provider:model[+evaluator][@prompt_version]~<hash>`, e.g.
    'openai:gpt-4o-mini+contextual@judge-prompt-2~1a2b3c4d'. The hash is the start of
    `judge_key` (provider, model, evaluator, kind, definition or rubric hash, prompt version),
    so two identities that read alike still get two keys; the readable part is for people."""
    who = f"{identity.provider}:{identity.model}" if identity.model else identity.provider
    evaluator = identity.evaluator.removeprefix("builtin:")
    if identity.evaluator not in (identity.provider, "demo"):
        who += f"+{evaluator}"
    if identity.prompt_version:
        who += f"@{identity.prompt_version}"
    readable = _DOTS.sub(".", _UNSAFE.sub("-", who)).strip("-.")[:_READABLE_MAX]
    return f"{readable}~{judge_key(identity)[:_HASH]}"


def _digest(parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class LabelledJudge:
    """A judge identity with labelled verdicts: its key, and a digest of its labelled verdicts
    (test, agent version, claim, judge answer, label, labeller, note) that changes whenever its
    calibration would."""

    key: str
    judge_key: str
    identity: JudgeIdentity
    labels: int
    digest: str


@dataclass(frozen=True)
class LabelledJudges:
    """The stored labels and the judge identities they label."""

    labels: int
    unmatched: int
    judges: tuple[LabelledJudge, ...]

    @property
    def digest(self) -> str:
        """Changes when any label or any labelled verdict does."""
        return _digest([self.labels, self.unmatched, [(j.key, j.digest) for j in self.judges]])

    def numbers(self) -> dict[str, int]:
        """What the labels show: labels stored, labels that matched no verdict, identities labelled."""
        return {"labels": self.labels, "unmatched_labels": self.unmatched, "judge_identities": len(self.judges)}


def _labelled_results(store: ResultStore, labels: Sequence[Label]) -> list[TestResult]:
    """The latest results of the labelled tests (no other result can match a label)."""
    tests = {lab.test_id for lab in labels}
    return list(store.get_many(k for k in store.list() if k.test_id in tests))


def _pair_fact(p: Pair) -> tuple[Any, ...]:
    lab = p.label
    return (p.result.test_id, p.result.agent, p.criterion, p.judge_passed, lab.passed, lab.labeller, lab.note)


def labelled_judges(store: ResultStore) -> LabelledJudges:
    """The judge identities whose verdicts among the store's latest results carry a stored label,
    in the order of their keys. Reads the labels, then only the results of labelled tests."""
    labels = store.labels()
    if not labels:
        return LabelledJudges(0, 0, ())
    pairs, unmatched = match_labels(_labelled_results(store, labels), labels)
    by_key: dict[str, list[Pair]] = defaultdict(list)
    for p in pairs:
        by_key[p.key].append(p)
    judges = [
        LabelledJudge(
            key=judge_partition_key(group[0].identity),
            judge_key=jk,
            identity=group[0].identity,
            labels=len(group),
            digest=_digest(sorted(_pair_fact(p) for p in group)),
        )
        for jk, group in by_key.items()
    ]
    return LabelledJudges(len(labels), len(unmatched), tuple(sorted(judges, key=lambda j: j.key)))


_CRITERIA = (
    Column("criterion", "string", "The judged claim, or (all) over every claim."),
    Column("labels", "int", "Labelled verdicts compared."),
    Column("agreement", "float", "Share of verdicts equal to the human label."),
    Column("kappa", "float", "Cohen's kappa (empty: undefined, one class only)."),
    Column("kappa_low", "float", "Lower bound of kappa's 95% interval."),
    Column("kappa_high", "float", "Upper bound of kappa's 95% interval."),
    Column("tpr", "float", "True positive rate (judge pass among human passes)."),
    Column("tnr", "float", "True negative rate (judge fail among human fails)."),
    Column("disagreements", "int", "Cases where judge and human answered differently."),
)
_CONFUSION = (
    Column("human", "string", "The human label."),
    Column("judge_pass", "int", "Verdicts the judge passed."),
    Column("judge_fail", "int", "Verdicts the judge failed."),
)


@dataclass(frozen=True)
class JudgeCalibration:
    """One judge identity's calibration (None: no labelled verdict of it among the latest results)
    and the gate it is held to (None: no `judge.calibration` is configured)."""

    key: str
    calibration: Calibration | None
    criteria: tuple[Calibration, ...]
    gate: CalibrationGate | None

    def metadata(self) -> dict[str, Any]:
        """The identity's details and figures (None where there is nothing to show), and its tables:
        the confusion matrix and a row per claim (the whole judge first)."""
        c = self.calibration
        if c is None:
            return {"labels": 0}
        who = c.judge
        calibrated = None if self.gate is None else self.gate.check(c) is None
        matrix = c.confusion
        return {
            "judge": who.label,
            "provider": who.provider,
            "model": who.model,
            "evaluator": who.evaluator,
            "kind": who.kind,
            "definition_hash": who.definition_hash,
            "prompt_version": who.prompt_version,
            "judge_key": c.judge_key,
            **_figures(c),
            "calibrated": calibrated,
            "confusion": Table(
                _CONFUSION,
                [
                    {"human": "pass", "judge_pass": matrix.tp, "judge_fail": matrix.fn},
                    {"human": "fail", "judge_pass": matrix.fp, "judge_fail": matrix.tn},
                ],
            ),
            "criteria": Table(_CRITERIA, [_criterion_row(r) for r in (c, *self.criteria)]),
        }

    def gate_result(self) -> Gate:
        """judges_calibrated for this identity: its calibration meets `judge.calibration` (passes,
        saying so, when no gate is configured)."""
        c = self.calibration
        said = (
            f"{self.key}: no labelled verdict among the latest results"
            if c is None
            else f"{c.judge.label}: kappa {'undefined' if c.kappa is None else f'{c.kappa:.3f}'} over {c.n} label(s)"
        )
        if self.gate is None:
            return Gate(
                name=JUDGES_CALIBRATED, passed=True, description=f"no judge.calibration gate is configured; {said}"
            )
        why = "it has no labelled verdict among the latest results" if c is None else self.gate.check(c)
        who = self.key if c is None else c.judge.label
        return Gate(
            name=JUDGES_CALIBRATED,
            passed=why is None,
            description=f"{said}: calibrated"
            if why is None
            else f"{who} is not calibrated, its verdicts only observe: {why}",
            metadata={"min_kappa": self.gate.min_kappa, "min_labels": self.gate.min_labels},
        )


def _criterion_row(c: Calibration) -> dict[str, Any]:
    return {"criterion": c.criterion or "(all)", **_figures(c)}


def _figures(c: Calibration) -> dict[str, Any]:
    """What one calibration measured, as metadata and table cells."""
    return {
        "labels": c.n,
        "agreement": sig(c.agreement),
        "kappa": sig(c.kappa),
        "kappa_low": sig(c.kappa_low),
        "kappa_high": sig(c.kappa_high),
        "tpr": sig(c.tpr),
        "tnr": sig(c.tnr),
        "disagreements": len(c.disagreements),
    }


def calibrate_identities(
    store: ResultStore, keys: Iterable[str], gate: CalibrationGate | None
) -> dict[str, JudgeCalibration]:
    """Calibrate the judge identities of `keys` (judge_partition_key) with the stored labels over
    the latest results, store their calibrations (the run's calibration gate reads the newest per
    judge) and return each key's calibration, in the order of `keys`."""
    wanted = list(dict.fromkeys(keys))
    labels = store.labels()
    results = _labelled_results(store, labels) if labels else []
    report = calibrate(results, labels, source=f"store {store.location}, stored labels")
    mine = [c for c in report.calibrations if judge_partition_key(c.judge) in wanted]
    if mine:
        store.put_calibrations(mine)
    out: dict[str, JudgeCalibration] = {}
    for key in wanted:
        rows = [c for c in mine if judge_partition_key(c.judge) == key]
        whole = next((c for c in rows if c.criterion is None), None)
        out[key] = JudgeCalibration(key, whole, tuple(c for c in rows if c.criterion is not None), gate)
    return out
