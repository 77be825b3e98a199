"""`agent-health calibrate [SOURCE] --labels FILE`: how well each judge agrees with human labels
(agreement, Cohen's kappa with its 95% interval, rates, confusion matrix, disagreeing cases), as
tables or JSON. The labels and the calibrations are stored beside the results, where the
`judge.calibration` gate reads the newest calibration of each judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agent_health.cli.options import limit_option
from agent_health.errors import UsageError
from agent_health.lazy import deferred

# loaded when the command runs: `agent-health --help` imports every command module to list it
if TYPE_CHECKING:
    import rich.console as rich_console
    import rich.table as rich_table

    import agent_health.analysis.calibration as calibration
    import agent_health.analysis.labels as human_labels
    import agent_health.cli.sources as sources
    import agent_health.stores as stores
    from agent_health.analysis.calibration import CalibrationReport
    from agent_health.model.calibration import Calibration
else:
    rich_console = deferred("rich.console")
    rich_table = deferred("rich.table")
    calibration = deferred("agent_health.analysis.calibration")
    human_labels = deferred("agent_health.analysis.labels")
    sources = deferred("agent_health.cli.sources")
    stores = deferred("agent_health.stores")


EXIT_OK = 0


def _num(value: float | None, fmt: str = ".3f") -> str:
    return "-" if value is None else format(value, fmt)


def _kappa(c: Calibration) -> str:
    if c.kappa is None:
        return "undefined"
    return f"{c.kappa:.3f} [{_num(c.kappa_low)}, {_num(c.kappa_high)}]"


def print_tables(report: CalibrationReport, limit: int) -> None:
    """One row per judge (and per criterion with enough labels), then the disagreeing cases."""
    console = rich_console.Console(highlight=False, soft_wrap=True)
    console.print(f"{report.source}: {report.labels} label(s)", markup=False)
    if not report.calibrations:
        console.print("no label matched a stored judge verdict", markup=False)
    else:
        table = rich_table.Table("judge", "criterion", "n", "agreement", "kappa [95% CI]", "TPR", "TNR", "FPR", "FNR")
        table.add_column("TP/FP/FN/TN")
        for c in report.calibrations:
            m = c.confusion
            table.add_row(
                f"{c.judge.label} {c.judge_key}", c.criterion or "(all)", str(c.n), _num(c.agreement), _kappa(c),
                _num(c.tpr), _num(c.tnr), _num(c.fpr), _num(c.fnr), f"{m.tp}/{m.fp}/{m.fn}/{m.tn}",
            )  # fmt: skip
        console.width = max(console.width, 200)  # CI logs: a long row beats a folded one
        console.print(table)
        for c in report.calibrations:
            if c.criterion is not None or not c.disagreements:
                continue
            console.print(f"disagreements of {c.judge.label} ({len(c.disagreements)}):", markup=False)
            for d in c.disagreements[:limit]:
                judge = "pass" if d.judge_passed else "fail"
                human = "pass" if d.human_passed else "fail"
                console.print(
                    f"  {d.test_id} [{d.agent}] {d.criterion!r}: judge {judge}, human {human}\n"
                    f"    judge: {d.judge_reasoning or '-'}\n    human: {d.human_note or '-'}",
                    markup=False,
                )
            if len(c.disagreements) > limit:
                console.print(f"  ... {len(c.disagreements) - limit} more; use --json for all", markup=False)
    if report.unmatched:
        console.print(f"{len(report.unmatched)} label(s) matched no stored judge verdict:", markup=False)
        for lab in report.unmatched[:limit]:
            console.print(f"  {lab.source or lab.test_id}: {lab.test_id} {lab.agent or lab.run_id}", markup=False)


@click.command("calibrate")
@click.argument("source", required=False)
@click.option(
    "--labels",
    "labels_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Human labels (.jsonl or .csv); stored beside the results. Default: the labels already stored.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the calibration as JSON.")
@click.option("--no-save", is_flag=True, help="Neither store the labels nor the calibrations (a dry look).")
@click.option(
    "--min-criterion-labels",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Fewest labelled verdicts of one criterion for its own row.",
)
@limit_option(20, "Disagreeing cases listed per judge in the table.")
@click.pass_context
def calibrate_command(
    ctx: click.Context,
    source: str | None,
    labels_path: Path | None,
    as_json: bool,
    no_save: bool,
    min_criterion_labels: int,
    limit: int,
) -> None:
    """Calibrate the judges of SOURCE (a run id, a store folder, a JSON report or an agent version;
    default: every latest result in the configured store) against human labels.

    Exit codes: 0 calibrated; 2 bad input (a labels file line, nothing to calibrate).
    """
    config = ctx.obj["config"]
    store = sources.runs_store(config)
    src = sources.open_source(source, config, store=store) if source else sources.store_source(store)
    home = src.store or store  # where the labels and calibrations go: beside the results
    labels = human_labels.load_labels(labels_path) if labels_path is not None else home.labels()
    if not labels:
        raise UsageError(f"no labels: give --labels FILE (store {home.location} holds none)")
    where = f"{src.label}, labels {labels_path or 'stored in ' + home.location}"
    report = calibration.calibrate(src.results(), labels, source=where, min_criterion_labels=min_criterion_labels)
    if not no_save:
        if labels_path is not None:
            home.put_labels(labels)
        if report.calibrations:
            home.put_calibrations(report.calibrations)
    if as_json:
        click.echo(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        print_tables(report, limit)
    if not report.calibrations:
        click.echo(f"error: none of the {len(labels)} label(s) matched a stored judge verdict in {src.label}", err=True)
        ctx.exit(2)
    ctx.exit(EXIT_OK)
