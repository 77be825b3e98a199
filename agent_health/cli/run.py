"""`agent-health run`: load eval files, run them against agent versions, report, exit 0/1/2."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import click

from agent_health.config import Config
from agent_health.loader import LoadedTest, LoadResult
from agent_health.model import RunReport, RunSummary, TestResult
from agent_health.reporters.base import Reporter

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


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


def select(tests: list[LoadedTest], labels: Sequence[str], rx: re.Pattern[str] | None) -> list[LoadedTest]:
    """Tests carrying every label whose name or id matches `rx`."""
    return [
        t
        for t in tests
        if all(label in t.case.labels for label in labels)
        and (rx is None or rx.search(t.case.name) or rx.search(t.case.id))
    ]


def build_reporters(specs: Sequence[str], verbose: bool) -> list[Reporter]:
    from agent_health.reporters.html import HtmlReporter
    from agent_health.reporters.json_report import JsonReporter
    from agent_health.reporters.junit import JunitReporter
    from agent_health.reporters.summary import SummaryReporter

    kinds = {"json": JsonReporter, "junit": JunitReporter, "html": HtmlReporter}
    out: list[Reporter] = []
    stdout_taken = False
    for spec in specs or ("summary",):
        name, _, path = spec.partition("=")
        if name == "summary":
            continue
        if name not in kinds:
            raise click.UsageError(f"unknown reporter {name!r}; use summary, json[=FILE], junit[=FILE] or html[=FILE]")
        stdout_taken |= not path
        out.append(kinds[name](path or None))
    # the summary always runs; it moves to stderr when a machine-readable report owns stdout
    out.insert(0, SummaryReporter(sys.stderr if stdout_taken else sys.stdout, verbose=verbose))
    return out


def print_list(result: LoadResult, tests: list[LoadedTest]) -> None:
    for t in tests:
        c = t.case
        prompt = (c.prompt or "(dynamic prompt)").replace("\n", " ")
        click.echo(f"{c.id}  [{', '.join(c.labels)}]  {prompt[:70]}")
    click.echo(f"{len(tests)} test(s) in {len({t.case.source_file for t in tests})} file(s)")


async def run_agents(
    tests: list[LoadedTest],
    config: Config,
    agents: Sequence[str],
    options,
    reporters: list[Reporter],
    no_cache: bool = False,
    replay: str | None = None,
) -> tuple[list[TestResult], list[RunSummary], list[str], int]:
    from agent_health.session import open_engine

    results: list[TestResult] = []
    summaries: list[RunSummary] = []
    hook_errors: list[str] = []
    not_run = 0
    for ref in agents:
        engine = open_engine(config, ref, options, no_cache=no_cache, replay=replay)
        for rep in reporters:
            rep.start(ref, len(tests))
        t0 = time.perf_counter()
        mine: list[TestResult] = []
        try:
            async for r in engine.run(tests):
                mine.append(r)
                for rep in reporters:
                    rep.result(r)
        finally:
            await engine.aclose()
            for rep in reporters:
                rep.agent_done(ref)
        results.extend(mine)
        summaries.append(RunSummary.of(ref, mine, (time.perf_counter() - t0) * 1000))
        hook_errors.extend(engine.hook_errors)
        not_run += engine.not_run
        if options.fail_fast and any(r.status != "passed" for r in mine):
            break
    return results, summaries, hook_errors, not_run


@click.command("run")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="KEY@VERSION",
    help="Agent version to run (repeatable; each is run and reported). Default: the config's.",
)
@click.option("--concurrency", type=click.IntRange(min=1), help="Tests in flight at once.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Per-test timeout in seconds.")
@click.option("--epochs", type=click.IntRange(min=1), help="Independent trials per test (pass@k, pass^k).")
@click.option("--fail-fast", is_flag=True, help="Stop starting tests after the first failure or error.")
@click.option("--no-judge", is_flag=True, help="Skip every judge() (neutral verdicts); also AGENT_HEALTH_SKIP_JUDGE=1.")
@click.option(
    "--no-cache", is_flag=True, help="Bypass the judge cache (neither read nor write); also AGENT_HEALTH_NO_CACHE=1."
)
@click.option(
    "--replay",
    type=click.Choice(["off", "record", "auto", "strict"]),
    envvar="AGENT_HEALTH_REPLAY",
    help="Record agent runs, replay recordings (auto: replay when recorded, else record; strict: a "
    "missing recording is an error). Default: the config's, off.",
)
@click.option("--label", "labels", multiple=True, help="Only tests with this label (repeatable: all must match).")
@click.option("--grep", help="Only tests whose name or id matches this regular expression.")
@click.option("--list", "list_only", is_flag=True, help="Discover and print the tests without running them.")
@click.option(
    "--reporter",
    "reporters",
    multiple=True,
    metavar="summary|json[=FILE]|junit[=FILE]",
    help="Reporter (repeatable). json/junit without FILE write to stdout.",
)
@click.option("-v", "--verbose", is_flag=True, help="Print every test and its signals.")
@click.pass_context
def run_command(
    ctx: click.Context,
    paths: tuple[Path, ...],
    agents: tuple[str, ...],
    concurrency: int | None,
    timeout: float | None,
    epochs: int | None,
    fail_fast: bool,
    no_judge: bool,
    no_cache: bool,
    replay: str | None,
    labels: tuple[str, ...],
    grep: str | None,
    list_only: bool,
    reporters: tuple[str, ...],
    verbose: bool,
) -> None:
    """Run eval files (*.eval.py, *.json, *.yaml, *.jsonl) or folders of them.

    Exit codes: 0 all passed; 1 a test failed or errored; 2 usage, configuration or file errors.
    """
    import gc
    import os

    from agent_health.loader import load_tests
    from agent_health.session import engine_options

    # Everything imported so far lives for the whole process: keep the collector from walking it
    # again on every collection while thousands of results are built (about 10% of a 1,000-test run).
    gc.freeze()

    config: Config = ctx.obj["config"]
    paths = paths or (config.path(config.eval_root),)
    try:
        grep_rx = re.compile(grep, re.IGNORECASE) if grep else None
    except re.error as exc:
        raise click.UsageError(f"--grep {grep!r} is not a valid regular expression: {exc}") from exc
    agents = agents or (config.default_agent,)
    for ref in agents:  # fail before loading anything: the message lists the known agents
        config.agent(ref)
    loaded = load_tests(paths, root=eval_root_for(config, paths))
    load_errors = [str(e) for e in loaded.errors]
    tests = select(loaded.tests, labels, grep_rx)
    if list_only:
        for err in load_errors:
            click.echo(f"error: {err}", err=True)
        print_list(loaded, tests)
        ctx.exit(EXIT_USAGE if load_errors else EXIT_OK)
    if not tests:
        for err in load_errors:
            click.echo(f"error: {err}", err=True)
        where = ", ".join(map(str, paths))
        filt = " matching the filters" if (labels or grep) and loaded.tests else ""
        click.echo(f"error: no tests found{filt} in {where}", err=True)
        ctx.exit(EXIT_USAGE)
    skip = no_judge or os.environ.get("AGENT_HEALTH_SKIP_JUDGE", "").lower() in ("1", "true", "yes")
    options = engine_options(
        config, concurrency=concurrency, timeout_s=timeout, epochs=epochs, fail_fast=fail_fast, skip_judge=skip
    )
    reps = build_reporters(reporters, verbose)
    started = time.time()
    results, summaries, hook_errors, not_run = asyncio.run(
        run_agents(tests, config, agents, options, reps, no_cache, replay)
    )
    report = RunReport(
        started_at=started,
        finished_at=time.time(),
        summaries=summaries,
        results=results,
        load_errors=load_errors,
        hook_errors=hook_errors,
        not_run=not_run,
    )
    for rep in reps:
        rep.finish(report)
    if load_errors:
        ctx.exit(EXIT_USAGE)
    bad = any(r.status != "passed" for r in results) or hook_errors
    ctx.exit(EXIT_FAILED if bad else EXIT_OK)
