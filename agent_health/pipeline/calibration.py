"""Judge calibration for a pipeline: every judge identity's agreement with the stored human labels
over the store's latest results, one table row per judge (and per criterion with enough labels),
and the `judges_calibrated` gate against `judge.calibration`."""

from __future__ import annotations

from dataclasses import dataclass

from agent_health.analysis.calibration import CalibrationReport, calibrate
from agent_health.model.calibration import Calibration, CalibrationGate
from agent_health.pipeline.gates import Gate
from agent_health.pipeline.tables import Column, Table, sig
from agent_health.stores import ResultStore

JUDGES_CALIBRATED = "judges_calibrated"  # the name of the check on the calibration asset

_COLUMNS = (
    Column("judge", "string", "Judge identity: provider:model (evaluator)."),
    Column("judge_key", "string", "Key of the judge identity (provider, model, evaluator, definition, prompt)."),
    Column("criterion", "string", "The judged claim, or (all) over every claim."),
    Column("labels", "int", "Labelled verdicts compared."),
    Column("agreement", "float", "Share of verdicts equal to the human label."),
    Column("kappa", "float", "Cohen's kappa (empty: undefined, one class only)."),
    Column("kappa_low", "float", "Lower bound of kappa's 95% interval."),
    Column("kappa_high", "float", "Upper bound of kappa's 95% interval."),
    Column("tpr", "float", "True positive rate (judge pass among human passes)."),
    Column("tnr", "float", "True negative rate (judge fail among human fails)."),
    Column("disagreements", "int", "Cases where judge and human answered differently."),
    Column("calibrated", "bool", "Meets judge.calibration (empty when no gate is configured)."),
)


@dataclass(frozen=True)
class CalibrationView:
    """What the calibration asset shows: the report, and the gate it is held to."""

    report: CalibrationReport
    gate: CalibrationGate | None

    def judges(self) -> list[Calibration]:
        """The whole-judge calibrations (criterion None)."""
        return [c for c in self.report.calibrations if c.criterion is None]

    def table(self) -> Table:
        rows = []
        for c in self.report.calibrations:
            ok = None if self.gate is None or c.criterion is not None else self.gate.check(c) is None
            rows.append(
                {
                    "judge": c.judge.label,
                    "judge_key": c.judge_key,
                    "criterion": c.criterion or "(all)",
                    "labels": c.n,
                    "agreement": sig(c.agreement),
                    "kappa": sig(c.kappa),
                    "kappa_low": sig(c.kappa_low),
                    "kappa_high": sig(c.kappa_high),
                    "tpr": sig(c.tpr),
                    "tnr": sig(c.tnr),
                    "disagreements": len(c.disagreements),
                    "calibrated": ok,
                }
            )
        return Table(_COLUMNS, rows)

    def numbers(self) -> dict[str, int]:
        return {
            "labels": self.report.labels,
            "judges": len(self.judges()),
            "unmatched_labels": len(self.report.unmatched),
        }

    def gate_result(self) -> Gate:
        """judges_calibrated: every labelled judge meets `judge.calibration` (passes, saying so,
        when no gate is configured or nothing is labelled)."""
        judges = self.judges()
        said = [
            f"{c.judge.label}: kappa {'undefined' if c.kappa is None else f'{c.kappa:.3f}'} over {c.n} label(s)"
            for c in judges
        ]
        if self.gate is None:
            return Gate(
                name=JUDGES_CALIBRATED,
                passed=True,
                description="no judge.calibration gate is configured; "
                + ("; ".join(said) if said else "no labelled judge verdicts yet"),
            )
        failing = {c.judge.label: why for c in judges if (why := self.gate.check(c)) is not None}
        if not judges:
            description = "no labelled judge verdicts yet: every gating judge only observes (judge.calibration)"
        elif failing:
            description = "not calibrated, their verdicts only observe: " + "; ".join(
                f"{who}: {why}" for who, why in sorted(failing.items())
            )
        else:
            description = "every labelled judge is calibrated: " + "; ".join(said)
        return Gate(
            name=JUDGES_CALIBRATED,
            passed=bool(judges) and not failing,
            description=description,
            metadata={"min_kappa": self.gate.min_kappa, "min_labels": self.gate.min_labels},
        )


def calibrate_judges(store: ResultStore, gate: CalibrationGate | None) -> CalibrationView:
    """Calibrate every judge with the store's labels over its latest results, and store the
    calibrations (the run gate reads the newest)."""
    labels = store.labels()
    report = calibrate(store.get_many(store.list()), labels, source=f"store {store.location}, stored labels")
    if report.calibrations:
        store.put_calibrations(report.calibrations)
    return CalibrationView(report, gate)
