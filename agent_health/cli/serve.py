"""`agent-health serve [RUN|STORE]`: the runs of a result store and their HTML reports on
http://127.0.0.1, live while a run is going."""

from __future__ import annotations

from pathlib import Path

import click


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
    from agent_health.errors import UsageError
    from agent_health.reporters.serve import serve
    from agent_health.stores import LocalResultStore, ResultStore, StoreError, open_store
    from agent_health.stores.local import RUNS_DIR

    config = ctx.obj["config"]
    only: str | None = None
    store: ResultStore
    path = Path(source) if source else None
    if path is not None and path.is_dir() and path.parent.name == RUNS_DIR and (path / "run.json").is_file():
        store, only = LocalResultStore(path.parent.parent), path.name  # a run folder
    elif path is not None and path.is_dir():
        store = LocalResultStore(path)
    else:
        store = open_store(config)
        if source is not None:
            try:
                run = store.get_run(source)
            except StoreError:
                run = None  # not a valid run id (it has a '/')
            if run is None:
                newest = ", ".join(r.id for r in store.list_runs()[:5]) or "none"
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

    serve(store, host=host, port=port, only_run=only, on_ready=ready)
    click.echo("stopped")


def _loopback(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
