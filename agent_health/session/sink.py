"""Where a run's results go the moment they finish: the result store first, then every reporter.

Store and report writes are blocking I/O and never run on the event loop: results go to writer
threads (several store writes at once), then to the sink's one thread, which calls the reporters
(so reporters are only ever called from one thread), and a result a reporter saw is already in the
store (a run killed mid-way has a report that is a subset of its stored results). At most
`max_pending` results wait; past that, finishing tests wait, so a slow store slows the run instead
of filling memory.

A failing reporter or store is reported once through `on_error` (and kept in `errors`); the
reporter is dropped, the store is retried with every result, and the run goes on.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from agent_health.model import EvalRun, RunReport, TestResult
from agent_health.offloop import DaemonThreadPool
from agent_health.reporters.base import Reporter, ReportError
from agent_health.stores import ResultStore

_STOP = object()
_BATCH = 64  # results handed to the sink's thread at once, at most
_HANDOFF_S = 0.005  # how long a finished result may wait for others to go with it
_PARALLEL_WRITES = 16  # store writes in flight at once


@dataclass(frozen=True)
class _Stored:
    """A writer thread has stored this result (or failed to): report it."""

    result: TestResult


class ResultSink:
    """The run's store and reporters behind one worker thread. Use inside the run's event loop."""

    def __init__(
        self,
        store: ResultStore | None,
        reporters: Sequence[Reporter],
        on_error: Callable[[str], None] | None = None,
        max_pending: int = 256,
    ):
        self.store = store
        self.reporters = list(reporters)
        self.on_error = on_error
        self.errors: list[str] = []
        self.stored = 0
        self._store_failures = 0
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._max_pending = max_pending
        self._room: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._batch: list[TestResult] = []
        self._handoff: asyncio.TimerHandle | None = None
        self._writers = DaemonThreadPool("agent-health-store") if store is not None else None
        self._held: deque[Any] = deque()  # batches and calls in order, waiting for writers
        self._in_flight = 0  # results handed to writers and not reported yet
        self._done = 0  # results reported whose room the loop has not got back yet

    def start(self) -> ResultSink:
        self._loop = asyncio.get_running_loop()
        self._room = asyncio.Semaphore(self._max_pending)
        self._thread = threading.Thread(target=self._work, name="agent-health-results", daemon=True)
        self._thread.start()
        return self

    # -- the loop's side ------------------------------------------------------------------------
    async def put(self, result: TestResult) -> None:
        """Queue a finished result for the store and the reporters. Results reach the sink's
        thread in batches, at most `_HANDOFF_S` after they finished (or `_BATCH` at once): waking
        a thread for every result would cost the loop a GIL handoff each time."""
        assert self._room is not None and self._loop is not None
        await self._room.acquire()
        self._batch.append(result)
        if len(self._batch) >= _BATCH:
            self._hand_over()
        elif self._handoff is None:
            self._handoff = self._loop.call_later(_HANDOFF_S, self._hand_over)

    def _hand_over(self) -> None:
        if self._handoff is not None:
            self._handoff.cancel()
            self._handoff = None
        if self._batch:
            batch, self._batch = self._batch, []
            self._queue.put(batch)

    def flush_blocking(self, timeout_s: float) -> None:
        """From another thread while the loop is stuck (the process is about to exit): store and
        report what the loop had not handed over yet, waiting at most `timeout_s`."""
        self._hand_over()
        done: Future[Any] = Future()
        self._queue.put((done, lambda: None, ()))
        try:
            done.result(timeout_s)
        except Exception:
            pass

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` on the sink's thread after everything queued before it."""
        self._hand_over()
        future: Future[Any] = Future()
        self._queue.put((future, fn, args))
        return await asyncio.wrap_future(future)

    async def begin(self, run: EvalRun, totals: dict[str, int]) -> None:
        """Write the run's manifest (status running) and tell the reporters the run starts."""
        await self.call(self._begin, run, totals)

    async def agent_done(self, agent: str) -> None:
        await self.call(self._each, "agent_done", agent)

    async def finish(self, run: EvalRun, report: RunReport) -> None:
        """Rewrite the manifest with how the run ended and let the reporters finish."""
        await self.call(self._finish, run, report)

    async def close(self) -> None:
        await self.call(lambda: None)
        self._queue.put(_STOP)
        if self._writers is not None:
            self._writers.shutdown(wait=False)

    # -- the sink's thread ----------------------------------------------------------------------
    # Results are written to the store by up to `_PARALLEL_WRITES` writer threads (a local store
    # syncs every file to disk, and parallel syncs share the disk's journal commits); a writer
    # hands each stored result back to this thread, which reports it. A call (begin, agent_done,
    # finish) waits until every result queued before it is stored and reported.
    def _work(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                self._release()  # the loop gets its room back once, not per result
                item = self._queue.get()
            if item is _STOP:
                return
            if isinstance(item, _Stored):
                self._in_flight -= 1
                self._each("result", item.result)
                self._done += 1
            else:
                self._held.append(item)
            self._advance()

    def _advance(self) -> None:
        """Start what the held items allow, in order."""
        while self._held:
            item = self._held[0]
            if isinstance(item, list):  # results to store
                while item and (self._writers is None or self._in_flight < _PARALLEL_WRITES):
                    self._write(item.pop(0))
                if item:
                    return  # every writer is busy: go on when one hands a result back
                self._held.popleft()
                continue
            if self._in_flight:
                return  # a call runs once everything before it is stored and reported
            self._held.popleft()
            future, fn, args = item
            try:
                future.set_result(fn(*args))
            except BaseException as exc:
                future.set_exception(exc)

    def _write(self, result: TestResult) -> None:
        self._in_flight += 1
        if self._writers is None:  # no store: straight to the reporters
            self._queue.put(_Stored(result))
        else:
            self._writers.submit(self._store_one, result)

    def _store_one(self, result: TestResult) -> None:
        """On a writer thread: store one result, then hand it back for reporting."""
        assert self.store is not None
        try:
            self.store.put(result)
        except Exception as exc:
            with self._lock:
                self._store_failures += 1
                first = self._store_failures == 1
            if first:  # once: every later result would say the same
                self._error(f"result store {self.store.location}: {exc}; the run goes on without it")
        else:
            with self._lock:
                self.stored += 1
        finally:
            self._queue.put(_Stored(result))

    def _release(self) -> None:
        n, self._done = self._done, 0
        if not n:
            return
        assert self._loop is not None and self._room is not None
        room = self._room

        def release() -> None:
            for _ in range(n):
                room.release()

        try:
            self._loop.call_soon_threadsafe(release)
        except RuntimeError:  # the loop is gone (the run was torn down)
            pass

    def _error(self, message: str) -> None:
        self.errors.append(message)
        if self.on_error is not None:
            self.on_error(message)

    def _each(self, method: str, *args: Any) -> None:
        for rep in list(self.reporters):
            try:
                getattr(rep, method)(*args)
            except Exception as exc:
                self._drop(rep, exc)

    def _drop(self, rep: Reporter, exc: Exception) -> None:
        self.reporters.remove(rep)
        try:
            rep.abort()
        except Exception:
            pass
        message = str(exc) if isinstance(exc, ReportError) else f"reporter {rep.name}: {type(exc).__name__}: {exc}"
        self._error(f"{message}; its report is incomplete (results are still stored)")

    def _put_run(self, run: EvalRun) -> None:
        if self.store is None:
            return
        try:
            self.store.put_run(run)
        except Exception as exc:
            self._error(f"result store {self.store.location}: cannot write the run manifest: {exc}")

    def _begin(self, run: EvalRun, totals: dict[str, int]) -> None:
        self._put_run(run)
        self._each("begin", run)
        for agent, total in totals.items():
            self._each("start", agent, total)

    def _finish(self, run: EvalRun, report: RunReport) -> None:
        if self._store_failures > 1 and self.store is not None:
            self._error(f"result store {self.store.location}: {self._store_failures} results could not be stored")
        self._put_run(run)
        self._each("finish", report)
