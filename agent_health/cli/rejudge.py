"""`agent-health rejudge [SOURCE]`: run the test bodies of stored results again with their agent
runs replayed (the agent is never called), so judges and evaluators give new verdicts, optionally
with another judge model; earlier verdicts stay on each result as history, and the re-judged
results are stored as a new evaluation run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from agent_health.cli.options import setting_options
from agent_health.cli.run import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    REPORTER_FORMS,
    build_reporters,
    exit_if_closed,
)
from agent_health.interrupts import real_ctrl_c
from agent_health.lazy import deferred

# loaded when the command runs: `agent-health --help` imports every command module to list it
if TYPE_CHECKING:
    import agent_health.cli.sources as sources
    import agent_health.session as session
    import agent_health.session.rejudge as session_rejudge
else:
    sources = deferred("agent_health.cli.sources")
    session = deferred("agent_health.session")
    session_rejudge = deferred("agent_health.session.rejudge")


@click.command("rejudge")
@click.argument("source", required=False)
@setting_options("rejudge")
@click.option(
    "--cache/--no-cache",
    default=False,
    show_default=True,
    help="Reuse verdicts from the judge cache (default: ask the judges again).",
)
@click.option(
    "--reporter",
    "reporters",
    multiple=True,
    metavar="|".join(REPORTER_FORMS),
    help="Reporter (repeatable), as for run.",
)
@click.option("-v", "--verbose", is_flag=True, help="Print every test and its signals.")
@click.pass_context
def rejudge_command(
    ctx: click.Context,
    source: str | None,
    given: dict[str, Any],
    cache: bool,
    reporters: tuple[str, ...],
    verbose: bool,
) -> None:
    """Re-judge stored results: SOURCE is a run id in the configured store (default: the newest
    run), an agent version (its latest stored results), a store folder or a JSON report;
    SOURCE#KEY@VERSION keeps one agent version. The tests' current bodies run against the stored
    agent runs; the agent is never called. Results are stored as a new run (in the store folder
    when SOURCE is one, else in the configured store).

    Exit codes: 0 all re-judged tests passed; 1 one failed or errored, or the budget stopped the
    run (unless --budget-exit 0); 2 usage or configuration errors, nothing to re-judge, or the store
    could not be written. Replayed agent runs cost nothing against a budget: only new judge spend
    counts.
    """
    config = ctx.obj["config"]
    # rejudge asks the judges again unless told (--cache): its own default, not run's --no-cache
    settings = session.build_settings(config, {**given, "cache": cache})
    src = sources.open_source(source, config, role="SOURCE") if source else sources.newest_run(config)
    what = src.run.id if src.run is not None else (source or src.label)
    results = list(src.results())
    with real_ctrl_c():  # a Ctrl-C while eval files are imported is not their KeyboardInterrupt
        tests, problems = session_rejudge.load_tests_for(results, config)
    reps = build_reporters(reporters, verbose)
    errors: list[str] = []

    def say(message: str) -> None:
        errors.append(message)
        click.echo(f"error: {message}", err=True)

    outcome = session.run_loop(
        session_rejudge.rejudge_results(
            results,
            tests,
            config,
            settings,
            source=what,
            store=src.store,
            reporters=reps,
            transport="cli",
            on_error=say,
        )
    )
    for line in (*problems, *outcome.skipped):
        click.echo(f"skipped: {line}", err=True)
    if outcome.run is None:
        click.echo(f"error: nothing to re-judge in {src.label} ({len(results)} stored result(s))", err=True)
        ctx.exit(EXIT_USAGE)
    run = outcome.run
    if run.store and run.stored:
        click.echo(
            f"{run.stored} result(s) re-judged and stored in {run.store} (run {run.run.id}, a rejudge of {what})",
            err=True,
        )
    exit_if_closed(run)
    if errors or run.output_errors:
        ctx.exit(EXIT_USAGE)
    ctx.exit(EXIT_OK if run.exit_ok else EXIT_FAILED)
