"""`agent-health merge REPORT... [-o FILE] [--reporter KIND[=FILE]]`: one report from the JSON
reports of `agent-health run --shard i/n` jobs, the same figures as the run unsharded; exit 0/1/2
as the run would have."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agent_health.cli.run import EXIT_FAILED, EXIT_OK, EXIT_USAGE, REPORTER_FORMS, build_reporters
from agent_health.lazy import deferred
from agent_health.model import EvalRun
from agent_health.reporters.base import ReportError

# loaded when the command runs: `agent-health --help` imports every command module to list it
if TYPE_CHECKING:
    import agent_health.reporters.merge as merging
    import agent_health.reporters.output as report_output
    import agent_health.reporters.summary as summary
else:
    merging = deferred("agent_health.reporters.merge")
    report_output = deferred("agent_health.reporters.output")
    summary = deferred("agent_health.reporters.summary")


@click.command("merge")
@click.argument("reports", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the merged JSON report here (default: stdout).",
)
@click.option(
    "--reporter",
    "reporters",
    multiple=True,
    metavar="|".join(f for f in REPORTER_FORMS if not f.startswith("json")),
    help="Also report the merged results (repeatable), e.g. github for the job summary and annotations.",
)
@click.pass_context
def merge_command(
    ctx: click.Context, reports: tuple[Path, ...], output: Path | None, reporters: tuple[str, ...]
) -> None:
    """Merge the JSON reports (--reporter json=FILE) of a run's shards (--shard i/n) into one.

    Every shard must be there once and no test may appear twice; counts, pass rates, tokens and
    cost are recomputed from the results. Exit codes: 0 all passed; 1 a test failed or errored, or
    tests were not run; 2 the reports cannot be merged, a load error, or a report could not be written.
    """
    for spec in reporters:
        if spec.partition("=")[0] in ("json", "jsonl"):
            raise click.UsageError(f"--reporter {spec}: the merged JSON report is what merge writes; use -o FILE")
    uses_stdout = any("=" not in spec and spec != "summary" for spec in reporters)
    if uses_stdout and output is None:
        raise click.UsageError("the merged JSON report goes to stdout without -o FILE; give -o FILE with --reporter")
    merged = merging.merge_reports([(str(p), merging.read_report(p)) for p in reports])
    reps = build_reporters(reporters or ("summary",), verbose=False)
    reps[0] = summary.SummaryReporter(sys.stderr)  # the summary never shares stdout with the JSON report
    config = ctx.obj["config"]
    for rep in reps:  # the shards ran here: their source files are under the configured eval root
        rep.eval_root = str(config.path(config.eval_root))
    failed_output = False
    out = report_output.ReportOutput("merge -o", str(output) if output else None, atomic=True)
    try:
        out.open()
        out.write(merging.dump(merged))
        out.close()
    except ReportError as exc:
        click.echo(f"error: {exc}", err=True)
        out.discard()
        failed_output = True
    # the merged results go through the reporters as a run's would
    run = EvalRun(
        transport="cli",
        started_at=merged.started_at,
        agents=tuple(s.agent for s in merged.summaries),
        load_errors=tuple(merged.load_errors),
    )
    live = list(reps)
    for step in ("begin", "start", "result", "agent_done", "finish"):
        for rep in list(live):
            try:
                if step == "begin":
                    rep.begin(run)
                elif step == "start":
                    for s in merged.summaries:
                        rep.start(s.agent, s.total)
                elif step == "result":
                    for r in merged.results:
                        rep.result(r)
                elif step == "agent_done":
                    for s in merged.summaries:
                        rep.agent_done(s.agent)
                else:
                    rep.finish(merged)
            except Exception as exc:  # noqa: BLE001 - a reporter's failure is reported, the others go on
                click.echo(f"error: {exc}", err=True)
                rep.abort()
                live.remove(rep)
                failed_output = True
    if failed_output or merged.load_errors:
        ctx.exit(EXIT_USAGE)
    clean = all(s.failed == 0 and s.errored == 0 for s in merged.summaries) and not merged.not_run
    ctx.exit(EXIT_OK if clean else EXIT_FAILED)
