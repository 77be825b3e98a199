"""`agent-health serve`: the runs of a result store, and each run's HTML report, over HTTP on
127.0.0.1, live while a run is going.

Built on aiohttp's server (already a dependency, for the connectors' HTTP pool), so no
hand-written HTTP. Pages:

- `/`: the runs, newest first, with status, result counts and agent versions;
- `/runs/<id>/`: a run: a status bar over the run's report (the page `ReportBuilder` renders,
  the same as `agent-health report`, served from `/runs/<id>/report`);
- `/api/runs` and `/api/runs/<id>`: the same facts as JSON, which both pages poll while a run is
  `running` (its results stream into the store's run log), so counts and the final status show up
  without reloading; the report under a running run's status bar is re-rendered when its results
  change.

Nothing else is served: there is no static-file route, so no path can reach a file, and a run id
must be one the store lists. Stored results are already scrubbed of secrets (the engine scrubs
them before they are stored). Requests whose Host header is not this machine are refused (a web
page elsewhere cannot reach the server through DNS rebinding).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from aiohttp import web

from agent_health.errors import StoreError, UsageError
from agent_health.model import EvalRun, TestResult
from agent_health.reporters.html import ReportBuilder, _asset, _csp_hash, _environment, script_json
from agent_health.stores import LocalResultStore, ResultStore
from agent_health.stores.local import RUNS_DIR

__all__ = ["RunServer", "run_snapshot", "serve", "tally"]

POLL_RUNNING_MS = 1000  # how often a page asks again while a run is going
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


def tally(results: Iterable[TestResult]) -> dict[str, Any]:
    """Counts of results by status, and their agent versions in order (streams: flat memory)."""
    counts: dict[str, Any] = {"results": 0, "passed": 0, "failed": 0, "errored": 0}
    agents: dict[str, None] = {}
    for r in results:
        counts["results"] += 1
        counts[r.status] += 1
        agents[r.agent] = None
    return {**counts, "agents": list(agents)}


def run_snapshot(run: EvalRun, counts: dict[str, Any] | None = None, error: str | None = None) -> dict[str, Any]:
    """What the run list and status bar show of one run, as JSON. `counts` come from `tally` over
    the run's stored results so far (None: from the manifest's summaries, which a finished run has)."""
    if counts is None:
        counts = {
            "results": sum(s.total for s in run.summaries),
            "passed": sum(s.passed for s in run.summaries),
            "failed": sum(s.failed for s in run.summaries),
            "errored": sum(s.errored for s in run.summaries),
            "agents": [s.agent for s in run.summaries],
        }
    agents = list(run.agents) or counts["agents"]
    return {
        "id": run.id,
        "status": run.status,
        "transport": run.transport,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "agents": agents,
        "planned": run.tests * max(len(agents), 1) if run.tests else None,
        **{k: counts[k] for k in ("results", "passed", "failed", "errored")},
        "not_run": sum(run.not_run.values()),
        "not_run_reason": run.not_run_reason,
        "rejudge_of": run.rejudge_of,
        "abandoned": run.abandoned,
        "not_stored": run.not_stored,
        "error": error,
    }


class RunServer:
    """The application over one store (optionally narrowed to one run). Store reads are blocking,
    so they run in worker threads; counts of a running run are read again only when its log
    changed, and a report is rendered again only when its run changed."""

    def __init__(self, store: ResultStore, only_run: str | None = None):
        self.store = store
        self.only_run = only_run
        self._counts: dict[str, tuple[object, dict[str, Any], str | None]] = {}
        self._pages: dict[str, tuple[object, Path]] = {}
        self._render_lock = threading.Lock()
        self._spool = tempfile.TemporaryDirectory(prefix="agent-health-serve-")

    def close(self) -> None:
        self._spool.cleanup()

    # -- reading the store (worker threads) -------------------------------------------------------
    def runs(self) -> list[EvalRun]:
        """The runs, as a reader sees them (`EvalRun.as_seen`: a killed run is `abandoned`)."""
        if self.only_run is not None:
            run = self.store.get_run(self.only_run)
            return [run.as_seen()] if run is not None else []
        return [run.as_seen() for run in self.store.list_runs()]

    def run(self, run_id: str) -> EvalRun | None:
        """The run `run_id` names, or None when it names nothing this server serves."""
        if not _RUN_ID.match(run_id) or (self.only_run is not None and run_id != self.only_run):
            return None
        try:
            run = self.store.get_run(run_id)
        except StoreError:
            return None
        return run.as_seen() if run is not None else None

    def _log_token(self, run: EvalRun) -> object:
        """Changes whenever the run's stored results may have: the run log's size and mtime in a
        local store; elsewhere (S3, OpenSearch) a clock tick, so those are read at most every 2 s."""
        if isinstance(self.store, LocalResultStore):
            log = self.store.root / RUNS_DIR / run.id / "results.jsonl"
            try:
                st = log.stat()
            except OSError:
                return (run.status, run.finished_at, None)
            return (run.status, run.finished_at, st.st_size, st.st_mtime_ns)
        return (run.status, run.finished_at, int(time.monotonic() // 2))

    def snapshot(self, run: EvalRun) -> dict[str, Any]:
        if run.status != "running" and run.summaries:
            return run_snapshot(run, None)
        token = self._log_token(run)
        cached = self._counts.get(run.id)
        if cached is None or cached[0] != token:
            error: str | None = None

            def readable() -> Iterator[TestResult]:
                nonlocal error
                try:
                    yield from self.store.run_results(run.id)
                except StoreError as exc:  # a damaged log (raised after every readable result): say so
                    error = str(exc)

            counts = tally(readable())
            cached = (token, counts, error)
            self._counts[run.id] = cached
        return run_snapshot(run, cached[1], cached[2])

    def report_file(self, run: EvalRun) -> Path:
        """The run's HTML report (rendered by `ReportBuilder`, as `agent-health report` does),
        rendered again only when the run changed since the last time."""
        token = self._log_token(run)
        with self._render_lock:
            cached = self._pages.get(run.id)
            if cached is not None and cached[0] == token and cached[1].exists():
                return cached[1]
            builder = ReportBuilder()
            try:
                builder.extend(self.store.run_results(run.id))
            except StoreError as exc:  # a damaged log: the page shows what could be read, and says so
                warnings = [*run.warnings, str(exc)]
            else:
                warnings = list(run.warnings)
            path = Path(self._spool.name) / f"{run.id}-{time.monotonic_ns()}.html"
            builder.write(
                path,
                title=f"agent-health report: run {run.id}",
                source=f"run {run.id} in {self.store.location}",
                run=run,
                summaries=run.summaries,
                load_errors=run.load_errors,
                hook_errors=run.hook_errors,
                warnings=warnings,
            )
            if cached is not None:
                cached[1].unlink(missing_ok=True)
            self._pages[run.id] = (token, path)
            return path

    # -- HTTP -------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(middlewares=[_local_only, _headers])
        app.router.add_get("/", self._index)
        app.router.add_get("/api/runs", self._api_runs)
        app.router.add_get("/api/runs/{run_id}", self._api_run)
        app.router.add_get("/runs/{run_id}", self._run_redirect)
        app.router.add_get("/runs/{run_id}/", self._run_page)
        app.router.add_get("/runs/{run_id}/report", self._report)
        return app

    async def _all(self) -> list[dict[str, Any]]:
        def read() -> list[dict[str, Any]]:
            return [self.snapshot(r) for r in self.runs()]

        try:
            return await asyncio.to_thread(read)
        except StoreError as exc:  # unreachable or damaged store: say which, and keep serving
            raise web.HTTPServiceUnavailable(text=f"{exc}\n") from exc

    async def _one(self, request: web.Request) -> tuple[EvalRun, dict[str, Any]]:
        run = await asyncio.to_thread(self.run, request.match_info["run_id"])
        if run is None:
            raise web.HTTPNotFound(text="no such run\n")
        try:
            return run, await asyncio.to_thread(self.snapshot, run)
        except StoreError as exc:
            raise web.HTTPServiceUnavailable(text=f"{exc}\n") from exc

    async def _index(self, request: web.Request) -> web.StreamResponse:
        runs = await self._all()
        return _page("serve_index.html.j2", title=f"agent-health runs: {self.store.location}", data=runs)

    async def _api_runs(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"store": self.store.location, "runs": await self._all()})

    async def _api_run(self, request: web.Request) -> web.StreamResponse:
        _, snap = await self._one(request)
        return web.json_response(snap)

    async def _run_redirect(self, request: web.Request) -> web.StreamResponse:
        run, _ = await self._one(request)
        raise web.HTTPFound(f"/runs/{run.id}/")

    async def _run_page(self, request: web.Request) -> web.StreamResponse:
        run, snap = await self._one(request)
        return _page("serve_run.html.j2", title=f"agent-health run {run.id}", data=snap)

    async def _report(self, request: web.Request) -> web.StreamResponse:
        run, _ = await self._one(request)
        path = await asyncio.to_thread(self.report_file, run)
        return web.Response(body=path.read_bytes(), content_type="text/html", charset="utf-8")


def _page(template: str, *, title: str, data: Any) -> web.Response:
    """One of the server's own pages: report.css and serve.js inline, allowed by hash, and JSON
    fetched from this server only."""
    css, js = _asset("report.css") + _asset("serve.css"), _asset("serve.js")
    csp = (
        f"default-src 'none'; style-src {_csp_hash(css)}; script-src {_csp_hash(js)}; connect-src 'self'; "
        "frame-src 'self'; img-src data:; base-uri 'none'; form-action 'none'"
    )
    context = {
        "title": title,
        "css": css,
        "js": js,
        "csp": csp,
        "data_json": script_json(data),
        "poll_ms": POLL_RUNNING_MS,
    }
    html = _environment().get_template(template).render(**context)
    response = web.Response(text=html, content_type="text/html")
    # frame-ancestors works only as a header (a <meta> policy ignores it, and says so in the console)
    response.headers["Content-Security-Policy"] = csp + "; frame-ancestors 'none'"
    return response


def _host_of(header: str) -> str:
    if header.startswith("["):
        return header.partition("]")[0] + "]"
    return header.rpartition(":")[0] if header.count(":") == 1 else header


@web.middleware
async def _local_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """On a loopback address, answer only requests addressed to this machine by name."""
    server_host = (request.transport.get_extra_info("sockname") or ("",))[0] if request.transport else ""
    if server_host in ("127.0.0.1", "::1") and _host_of(request.host) not in _LOCAL_HOSTS:
        raise web.HTTPForbidden(text="this server answers requests to 127.0.0.1 or localhost only\n")
    return await handler(request)


@web.middleware
async def _headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    response.headers.setdefault("Cache-Control", "no-store")  # runs change: always ask again
    if request.path.endswith("/report"):
        response.headers.setdefault("Content-Security-Policy", "frame-ancestors 'self'")
    return response


def serve(
    store: ResultStore,
    host: str = "127.0.0.1",
    port: int = 8765,
    only_run: str | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve `store` until SIGINT or SIGTERM; `on_ready` gets the URL once the port is bound
    (port 0: a free one)."""
    asyncio.run(_serve(RunServer(store, only_run), host, port, on_ready))


async def _serve(server: RunServer, host: str, port: int, on_ready: Callable[[str], None] | None) -> None:
    runner = web.AppRunner(server.app(), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            raise UsageError(f"serve: cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        bound = runner.addresses[0]
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        if on_ready is not None:
            on_ready(f"http://{shown}:{bound[1]}/")
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await runner.cleanup()
        with contextlib.suppress(OSError):
            server.close()
