"""`agent-health report [SOURCE] -o FILE`: the self-contained HTML page of a run, a JSON report,
a store's latest results or one agent version's."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent_health.lazy import deferred

# loaded when the command runs: `agent-health --help` imports every command module to list it
if TYPE_CHECKING:
    import agent_health.cli.sources as sources
    import agent_health.reporters.html as html
    import agent_health.stores as stores
else:
    sources = deferred("agent_health.cli.sources")
    html = deferred("agent_health.reporters.html")
    stores = deferred("agent_health.stores")


@click.command("report")
@click.argument("source", required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default="agent-health-report.html",
    show_default=True,
    help="HTML file to write.",
)
@click.option("--title", help="Page title (default: names the source).")
@click.pass_context
def report_command(ctx: click.Context, source: str | None, output: Path, title: str | None) -> None:
    """Write the HTML report of SOURCE: a run id in the configured store (default: the newest run),
    a JSON report file (`--reporter json`), a store folder (its latest results) or an agent version
    (its latest stored results); SOURCE#KEY@VERSION keeps one agent version."""
    config = ctx.obj["config"]
    src = sources.open_source(source, config) if source else sources.newest_run(config)
    builder = html.ReportBuilder()
    try:
        builder.extend(src.results())
    except stores.StoreError as exc:  # a damaged run log: the page shows what could be read, and exit 2 says so
        damaged: stores.StoreError | None = exc
    else:
        damaged = None
    page: dict[str, Any] = {"title": title or f"agent-health report: {src.label}", "source": src.label}
    if src.report is not None:
        page.update(html.report_page(src.report))
    elif src.run is not None:
        page.update(run=src.run, summaries=src.summaries, load_errors=src.run.load_errors,
                    hook_errors=src.run.hook_errors)  # fmt: skip
    n = len(builder)
    builder.write(output, **page)
    click.echo(f"wrote {output} ({n} test result(s) from {src.label})")
    if src.run is not None and src.run.status == "abandoned":
        click.echo(f"note: run {src.run.id} was abandoned: {src.run.abandoned}", err=True)
    if damaged is not None:
        click.echo(f"error: {damaged}", err=True)
        ctx.exit(2)
