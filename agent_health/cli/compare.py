"""`agent-health compare BASELINE CANDIDATE`: per-test flips and deltas with statistics, as a
table or JSON, and a CI exit code (`--fail-on regression|significant`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

import agent_health.analysis as analysis
from agent_health.cli.options import limit_option
from agent_health.errors import UsageError
from agent_health.lazy import deferred
from agent_health.model import limits

# loaded when the command runs: `agent-health --help` imports every command module to list it
if TYPE_CHECKING:
    import rich.console as rich_console
    import rich.measure as rich_measure
    import rich.table as rich_table

    import agent_health.cli.sources as sources
    import agent_health.reporters.html as html
    from agent_health.analysis.compare import Comparison, TestDelta
else:
    rich_console = deferred("rich.console")
    rich_measure = deferred("rich.measure")
    rich_table = deferred("rich.table")
    sources = deferred("agent_health.cli.sources")
    html = deferred("agent_health.reporters.html")


EXIT_OK, EXIT_FAILED = 0, 1


def _num(value: float | None, fmt: str = "+.3g") -> str:
    return "-" if value is None else format(value, fmt)


def print_table(cmp: Comparison, limit: int) -> None:
    """The comparison as rich tables: statistics first, then every test that changed."""
    console = rich_console.Console(highlight=False, soft_wrap=True)
    console.print(f"[bold]{cmp.baseline}[/] -> [bold]{cmp.candidate}[/]", markup=True)
    counts = ", ".join(f"{n} {flip}" for flip, n in cmp.flip_counts.items())
    console.print(f"{len(cmp.tests)} test(s): {counts or 'none'}", markup=False)
    console.print(cmp.coverage_line(), markup=False)
    if cmp.stats:
        console.print(cmp.stats_line(), markup=False)
    changed = [t for t in cmp.tests if t.flip != "same"]
    if not changed:
        console.print("no test changed status", markup=False)
        return
    table = rich_table.Table("flip", "baseline", "candidate", "score delta", "cost delta USD", "latency delta ms")
    table.add_column("test", no_wrap=True)  # ids are what people copy and grep: never cut or fold them
    for t in changed[:limit]:
        table.add_row(
            _flip_text(t), _side(t, "baseline"), _side(t, "candidate"),
            _num(t.score_delta), _num(t.cost_delta_usd), _num(t.latency_delta_ms, "+.1f"), t.test_id,
        )  # fmt: skip
    # The table gets its natural width, wider than a narrow terminal or the 80 columns rich assumes
    # for a pipe (CI logs) when it must: a long line loses nothing, a cell cut or folded to fit does.
    natural = rich_measure.Measurement.get(console, console.options.update_width(1_000_000), table).maximum
    console.width = max(console.width, natural)
    console.print(table)
    if len(changed) > limit:
        console.print(f"... {len(changed) - limit} more changed test(s); use --json for all", markup=False)


def _flip_text(t: TestDelta) -> str:
    if t.flip == "noise":
        return f"noise ({t.noise_of}, p={t.flip_p_value:.2g})"
    return t.flip


def _side(t: TestDelta, side: str) -> str:
    status = getattr(t, f"{side}_status")
    trials = getattr(t, f"{side}_trials")
    if status and trials and trials.graded > 1:
        return f"{status} ({trials.passed}/{trials.graded})"
    return status or "-"


def failed_conditions(cmp: Comparison, fail_on: tuple[str, ...]) -> list[str]:
    """Each `--fail-on` condition that holds, said with what makes it hold: the regressed tests
    (noise excluded) by id, or the significance of the regression."""
    out = []
    if "regression" in fail_on and cmp.regressions:
        ids = "".join(f"\n  {t.test_id} ({t.baseline_status} -> {t.candidate_status})" for t in cmp.regressions)
        out.append(f"--fail-on regression: {len(cmp.regressions)} regressed test(s):{ids}")
    if "significant" in fail_on and cmp.significant_regression and cmp.stats:
        m = cmp.stats.mcnemar
        out.append(
            f"--fail-on significant: the candidate is significantly worse (McNemar exact p = {m.p_value:.4g} "
            f"< alpha {cmp.stats.alpha:g}; {m.regressed} regressed, {m.fixed} fixed)"
        )
    return out


@click.command("compare")
@click.argument("baseline")
@click.argument("candidate")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path), help="Write the comparison page.")
@click.option(
    "--fail-on",
    "fail_on",
    multiple=True,
    type=click.Choice(["regression", "significant"]),
    help="Exit 1 on any regressed test (noise excluded), or on a significant regression (McNemar p < alpha).",
)
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap resampling.")
@click.option("--resamples", type=click.IntRange(min=1, max=limits.RESAMPLES_MAX), default=10_000, show_default=True)
@limit_option(50, "Changed tests in the table.")
@click.pass_context
def compare_command(
    ctx: click.Context,
    baseline: str,
    candidate: str,
    as_json: bool,
    html_path: Path | None,
    fail_on: tuple[str, ...],
    alpha: float,
    seed: int,
    resamples: int,
    limit: int,
) -> None:
    """Compare BASELINE with CANDIDATE: JSON reports, run ids in the store, store folders or agent
    versions (their latest stored results); SPEC#KEY@VERSION picks one agent version of several.

    Exit codes: 0 fine; 1 a --fail-on condition holds; 2 bad input.
    """
    config = ctx.obj["config"]
    base = sources.open_source(baseline, config, role="BASELINE").single_agent("BASELINE")
    cand = sources.open_source(candidate, config, role="CANDIDATE").single_agent("CANDIDATE")
    base_results, cand_results = list(base.results()), list(cand.results())
    if not base_results and not cand_results:
        raise UsageError(f"nothing to compare: {base.label} and {cand.label} hold no results")
    cmp = analysis.compare_results(
        base_results,
        cand_results,
        baseline_ref=_ref(base.label, base.agents[0]),
        candidate_ref=_ref(cand.label, cand.agents[0]),
        alpha=alpha,
        resamples=resamples,
        seed=seed,
    )
    if html_path is not None:
        html.write_comparison(html_path, cmp, base_results, cand_results)
    if as_json:
        click.echo(json.dumps(cmp.model_dump(mode="json"), indent=2))
    else:
        print_table(cmp, limit)
        if html_path is not None:
            click.echo(f"comparison page: {html_path}")
    failed = failed_conditions(cmp, fail_on)
    for message in failed:  # on stderr, so --json output stays one JSON document
        click.echo(message, err=True)
    ctx.exit(EXIT_FAILED if failed else EXIT_OK)


def _ref(label: str, agent: str) -> str:
    """How a side is named: its agent version, with where it came from when that is not the store."""
    return agent if label.startswith(agent) else f"{agent} ({label})"
