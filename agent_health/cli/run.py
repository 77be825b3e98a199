"""`agent-health run`: load eval files, run them against agent versions through the one run path
(`agent_health.session.run_evaluation`), report, exit 0/1/2."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent_health.cli.options import setting_options
from agent_health.config import Config
from agent_health.errors import ConfigError, StoreRefusedRun
from agent_health.interrupts import Interrupted, real_ctrl_c
from agent_health.lazy import deferred
from agent_health.loader import LoadedTest, LoadResult, load_tests
from agent_health.reporters.base import Reporter
from agent_health.reporters.registry import REGISTRY as REPORTER_REGISTRY

# loaded when the command runs: `agent-health --help` imports every command module to list it
if TYPE_CHECKING:  # pragma: no cover
    import agent_health.reporters.summary as summary
    import agent_health.session as session
    import agent_health.session.process as process
    import agent_health.session.run as session_run
    from agent_health.session import RunOutcome
    from agent_health.session.control import RunControl
else:
    summary = deferred("agent_health.reporters.summary")
    session = deferred("agent_health.session")
    process = deferred("agent_health.session.process")
    session_run = deferred("agent_health.session.run")


EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_TERMINATED = 128 + 15  # the shell's code for a process ended by SIGTERM
EXIT_CLOSED_PIPE = 128 + 13  # the shell's code for a writer ended by SIGPIPE: its reader went away


def eval_root_for(config: Config, paths: Sequence[Path]) -> Path | None:
    """Name suites relative to the configured eval root when every path lies inside it, so a test
    has the same id whether its file or its folder was given (and the same as in Dagster)."""
    root = config.path(config.eval_root)
    try:
        for p in paths:
            p.resolve().relative_to(root)
    except ValueError:
        return None
    return root


# what --reporter takes, from the registry so --help never misses a built-in one (installed
# packages' reporters are listed by the error message: --help does not read entry points)
REPORTER_FORMS = ("summary", *(f"{name}[=FILE]" for name in REPORTER_REGISTRY.builtins))


def known_reporters() -> str:
    """Every reporter --reporter takes, installed packages' too (reads their entry points)."""
    forms = ["summary", *(f"{name}[=FILE]" for name in REPORTER_REGISTRY.kinds())]
    return ", ".join(forms[:-1]) + " or " + forms[-1]


def build_reporters(specs: Sequence[str], verbose: bool) -> list[Reporter]:
    out: list[Reporter] = []
    stdout_taken = False
    for spec in specs or ("summary",):
        name, _, path = spec.partition("=")
        if name == "summary":
            continue
        if name not in REPORTER_REGISTRY:
            raise click.UsageError(f"unknown reporter {name!r}; use {known_reporters()}")
        if not path and stdout_taken:
            raise click.UsageError(f"--reporter {spec}: another reporter already writes to stdout; give it =FILE")
        stdout_taken |= not path
        try:
            cls = REPORTER_REGISTRY.load(name)
        except ConfigError as exc:  # an installed package's reporter that cannot be imported
            raise click.UsageError(str(exc)) from None
        if not (isinstance(cls, type) and issubclass(cls, Reporter)):
            raise click.UsageError(
                f"reporter {name!r} ({REPORTER_REGISTRY.target(name)}) is not a subclass of "
                "agent_health.reporters.base.Reporter"
            )
        out.append(cls(path or None))  # type: ignore[call-arg]  # the reporter contract: cls(path)
    # the summary always runs; it moves to stderr when a machine-readable report owns stdout
    out.insert(0, summary.SummaryReporter(sys.stderr if stdout_taken else sys.stdout, verbose=verbose))
    return out


def print_list(result: LoadResult, tests: list[LoadedTest]) -> None:
    for t in tests:
        c = t.case
        prompt = (c.prompt or "(dynamic prompt)").replace("\n", " ")
        click.echo(f"{c.id}  [{', '.join(c.labels)}]  {prompt[:70]}")
    click.echo(f"{len(tests)} test(s) in {len({t.case.source_file for t in tests})} file(s)")


def _say(message: str) -> None:
    click.echo(f"error: {message}", err=True)


def exit_if_closed(outcome: RunOutcome) -> None:
    """A reader closed stdout (`agent-health run | head -1`): reporting there stopped, the run went
    on to its end; say so once and exit 141, as a writer ended by the closed pipe would."""
    if not outcome.closed_outputs:
        return
    for what in outcome.closed_outputs:
        click.echo(f"warning: {what}: reporting to it stopped; the run went on to its end", err=True)
    click.get_current_context().exit(EXIT_CLOSED_PIPE)


def _exit_stuck(message: str) -> None:
    """The watchdog found a test blocking the loop that cannot be interrupted: leave now (every
    result finished so far is stored, the tests still running are reported errored, the manifest
    says interrupted and the reports are finished) rather than hang."""
    process.flush_output()
    sys.stderr.write(f"error: {message}; exiting\n")
    sys.stderr.flush()
    os._exit(EXIT_FAILED)


@click.command("run")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@setting_options("run")
@click.option(
    "-f",
    "--file",
    "files",
    multiple=True,
    type=click.Path(path_type=Path),
    help="An eval file or folder to run (repeatable; the same as a PATH argument).",
)
@click.option("--list", "list_only", is_flag=True, help="Discover and print the tests without running them.")
@click.option(
    "--reporter",
    "reporters",
    multiple=True,
    metavar="|".join(REPORTER_FORMS),
    help="Reporter (repeatable): the summary (default), a JSON report, JSON lines, JUnit XML or a "
    "self-contained HTML page. Without FILE a report writes to stdout and the summary to stderr.",
)
@click.option("-v", "--verbose", is_flag=True, help="Print every test and its signals.")
@click.pass_context
def run_command(
    ctx: click.Context,
    paths: tuple[Path, ...],
    given: dict[str, Any],
    files: tuple[Path, ...],
    list_only: bool,
    reporters: tuple[str, ...],
    verbose: bool,
) -> None:
    """Run eval files (*.eval.py, *.json, *.yaml, *.jsonl) or folders of them.

    Settings come from these flags, then AGENT_HEALTH_* environment variables, then the
    configuration file, then defaults; a test's own timeout= and epochs= win (docs/running.md).
    Results are stored as they finish (--no-store: not at all).

    Exit codes: 0 all passed; 1 a test failed or errored, or the budget stopped the run (unless
    --budget-exit 0); 2 usage, configuration or file errors, or a report or the store could not be
    written; 130 / 143 interrupted by Ctrl-C / SIGTERM; 141 stdout was closed by its reader
    (`| head -1`: the run went on to its end and stored every result).
    """
    # Everything imported so far lives for the whole process: keep the collector from walking it
    # again on every collection while thousands of results are built (about 10% of a 1,000-test run).
    gc.freeze()

    config: Config = ctx.obj["config"]
    store, no_store, only = given.get("store"), given.get("no_store"), given.get("only")
    if store and no_store:
        raise click.UsageError("--store and --no-store contradict each other; give one")
    if only and no_store:
        raise click.UsageError("--only compares with the stored results; it cannot be combined with --no-store")
    settings = session.build_settings(config, given)
    if not settings.agents:  # fail before loading: the message lists the agents (build_settings checked given ones)
        config.agent_ref(config.default_agent)
    paths = (*paths, *files) or (config.path(config.eval_root),)
    with real_ctrl_c():  # a Ctrl-C while eval files are imported is not their KeyboardInterrupt
        loaded = load_tests(paths, root=eval_root_for(config, paths))
    load_errors = [str(e) for e in loaded.errors]
    selected = session.select_tests(loaded.tests, settings.labels, settings.grep)
    tests = session_run.shard_tests(selected, settings.shard)  # the run takes `selected`: it shards once itself
    if list_only:
        for err in load_errors:
            _say(err)
        if not settings.only:
            print_list(loaded, tests)
        for agent, chosen in session.plan_run(selected, config, settings)[0].items() if settings.only else ():
            click.echo(f"{agent}: {len(tests) - len(chosen)} skipped as up to date")  # what --only would run
            print_list(loaded, chosen)
        ctx.exit(EXIT_USAGE if load_errors else EXIT_OK)
    if not tests and not (settings.shard and selected):  # an empty shard of a selection runs (see below)
        for err in load_errors:
            _say(err)
        where = ", ".join(map(str, paths))
        filt = " matching the filters" if (settings.labels or settings.grep) and loaded.tests else ""
        filt += f" in shard {settings.shard} (of {len(selected)} selected)" if settings.shard and selected else ""
        _say(f"no tests found{filt} in {where}")
        ctx.exit(EXIT_USAGE)
    if not tests:  # an empty shard (more shards than tests): it runs nothing, reports so and passes,
        # so that a fixed CI matrix of shards always has every report to merge
        say = f"shard {settings.shard} holds none of the {len(selected)} selected test(s): nothing to run"
        click.echo(say, err=True)
    reps = build_reporters(reporters, verbose)
    for rep in reps:  # where source_file starts (the github reporter names files from the repository)
        rep.eval_root = loaded.root
    gc.freeze()  # the loaded tests live for the whole run too

    def run(control: RunControl) -> Coroutine[Any, Any, RunOutcome]:
        # Ctrl-C and SIGTERM (a CI job cancelled) end the run as interrupted: the tests in flight
        # end errored, every reporter finishes, nothing already stored is lost (session.process)
        return session.run_evaluation(
            selected,
            config,
            settings,
            reporters=reps,
            transport="cli",
            load_errors=load_errors,
            on_error=_say,
            on_stuck=_exit_stuck,
            control=control,
        )

    try:
        outcome = process.run_owned(run)
    except Interrupted as exc:
        click.echo(f"interrupted ({exc.signame})", err=True)
        ctx.exit(process.EXIT_CODES.get(exc.signame, EXIT_TERMINATED))
    except StoreRefusedRun as exc:  # before any test: say how to run anyway
        _say(f"{exc}: fix the store, or run without storing (--no-store, AGENT_HEALTH_STORE=none)")
        ctx.exit(EXIT_USAGE)
    if outcome.store and outcome.stored:
        click.echo(f"{outcome.stored} result(s) stored in {outcome.store} (run {outcome.run.id})", err=True)
    exit_if_closed(outcome)
    if load_errors or outcome.output_errors:
        ctx.exit(EXIT_USAGE)
    if outcome.uncalibrated and settings.judge.require_calibrated:
        for warning in outcome.uncalibrated:
            click.echo(f"error: {warning}", err=True)
        ctx.exit(EXIT_USAGE)
    ctx.exit(EXIT_OK if outcome.exit_ok else EXIT_FAILED)
