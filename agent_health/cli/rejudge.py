"""`agent-health rejudge [SOURCE]`: run the test bodies of stored results again with their agent
runs replayed (the agent is never called), so judges and evaluators give new verdicts, optionally
with another judge model; earlier verdicts stay on each result as history, and the re-judged
results are stored as a new evaluation run."""

from __future__ import annotations

import asyncio

import click

from agent_health.cli.run import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    REPORTER_FORMS,
    budget_options,
    budget_overrides,
    build_reporters,
)
from agent_health.model import limits


@click.command("rejudge")
@click.argument("source", required=False)
@click.option("--judge-model", metavar="[PROVIDER:]MODEL", help="Judge model for the new verdicts, over judge.model.")
@click.option("--label", "labels", multiple=True, help="Only tests with this label (repeatable: all must match).")
@click.option("--grep", help="Only tests whose name or id matches this regular expression.")
@click.option("--concurrency", type=click.IntRange(min=1, max=limits.CONCURRENCY_MAX), help="Tests in flight at once.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True, max=limits.TIMEOUT_MAX_S),
    help="Per-test timeout in seconds.",
)
@click.option(
    "--cache/--no-cache",
    default=False,
    show_default=True,
    help="Reuse verdicts from the judge cache (default: ask the judges again).",
)
@budget_options
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
    judge_model: str | None,
    labels: tuple[str, ...],
    grep: str | None,
    concurrency: int | None,
    timeout: float | None,
    cache: bool,
    max_cost: float | None,
    max_judge_cost: float | None,
    max_tokens: int | None,
    budget_exit: str | None,
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
    from agent_health.cli.sources import newest_run, open_source
    from agent_health.interrupts import real_ctrl_c
    from agent_health.session import build_settings
    from agent_health.session.rejudge import load_tests_for, rejudge_results

    config = ctx.obj["config"]
    settings = build_settings(
        config,
        {
            "judge_model": judge_model,
            "no_cache": not cache,
            "concurrency": concurrency,
            "timeout_s": timeout,
            "labels": labels or None,
            "grep": grep,
            **budget_overrides(max_cost, max_judge_cost, max_tokens, budget_exit),
        },
    )
    src = open_source(source, config, role="SOURCE") if source else newest_run(config)
    what = src.run.id if src.run is not None else (source or src.label)
    results = list(src.results())
    with real_ctrl_c():  # a Ctrl-C while eval files are imported is not their KeyboardInterrupt
        tests, problems = load_tests_for(results, config)
    reps = build_reporters(reporters, verbose)
    errors: list[str] = []

    def say(message: str) -> None:
        errors.append(message)
        click.echo(f"error: {message}", err=True)

    outcome = asyncio.run(
        rejudge_results(
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
    if errors or run.output_errors:
        ctx.exit(EXIT_USAGE)
    ctx.exit(EXIT_OK if run.exit_ok else EXIT_FAILED)
