"""`agent-health serve [RUN|STORE]`: the runs of a result store and their HTML reports on
http://127.0.0.1, live while a run is going."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agent_health.errors import UsageError
from agent_health.lazy import deferred

# loaded when the command runs: `agent-health --help` imports every command module to list it
if TYPE_CHECKING:
    import agent_health.cli.sources as sources
    import agent_health.reporters.serve as reporters_serve
    import agent_health.stores as stores
    import agent_health.stores.local as stores_local
else:
    sources = deferred("agent_health.cli.sources")
    reporters_serve = deferred("agent_health.reporters.serve")
    stores = deferred("agent_health.stores")
    stores_local = deferred("agent_health.stores.local")


@click.command("serve")
@click.argument("source", required=False)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (this machine only by default)."
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port to listen on (0: a free one)."
)
@click.pass_context
def serve_command(ctx: click.Context, source: str | None, host: str, port: int) -> None:
    """Serve the runs of the configured result store (or of SOURCE: a store folder, a run folder
    `<store>/_runs/<id>`, or a run id in the configured store) and each run's HTML report, until
    Ctrl-C. A running run's page updates as its results are stored."""
    config = ctx.obj["config"]
    only: str | None = None
    store: stores.ResultStore
    path = Path(source) if source else None
    if (
        path is not None
        and path.is_dir()
        and path.parent.name == stores_local.RUNS_DIR
        and (path / "run.json").is_file()
    ):
        store, only = stores.LocalResultStore(path.parent.parent), path.name  # a run folder
    elif path is not None and path.is_dir():
        store = stores.LocalResultStore(path)
    else:
        store = sources.runs_store(config)
        if source is not None:
            try:
                run = store.get_run(source)
            except stores.StoreError:
                run = None  # not a valid run id (it has a '/')
            if run is None:
                newest = ", ".join(sources.listed(r) for r in store.list_runs()[:5]) or "none"
                raise UsageError(
                    f"serve {source!r} is not a store folder, a run folder or a run id in store {store.location} "
                    f"(newest runs: {newest})"
                )
            only = run.id
    what = f"run {only} of store {store.location}" if only else f"the runs of store {store.location}"

    def ready(url: str) -> None:
        click.echo(f"serving {what} at {url} (Ctrl-C to stop)")
        if not _loopback(host):
            click.echo(f"warning: --host {host}: anyone who can reach this machine can read these runs", err=True)

    reporters_serve.serve(store, host=host, port=port, only_run=only, on_ready=ready)
    click.echo("stopped")


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
