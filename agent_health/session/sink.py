"""Where a run's results go the moment they finish: the result store first, then every reporter.

Store and report writes are blocking I/O and never run on the event loop: results are stored in
batches (`ResultStore.put_many`: for local files one fsync per batch, not per result; for S3 and
OpenSearch one bulk request), on the sink's one thread for a local store, on writer threads for
one that waits on a network (`ResultStore.concurrent_writes`); the sink's thread then calls the
reporters (so reporters are only ever called from one thread), and a result a reporter saw is
already in the store (a run killed mid-way has a report that is a subset of its stored results).
A batch is whatever finished while the previous one was being written: a slow store gets bigger
batches, not a longer queue. At most `max_pending` results wait; past that, finishing tests
wait, so a slow store slows the run instead of filling memory.

A failing reporter or store is reported once through `on_error` (and kept in `errors`); the
reporter is dropped, the store is retried with every result, and the run goes on. Nothing a
reporter raises ends the sink's thread (rich raises `SystemExit` on a broken pipe: the run then
waited for that thread for good). A reporter whose stdout or stderr was closed by its reader
(`OutputClosed`, `agent-health run | head -1`) is dropped without an error and kept in `closed`.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from agent_health.errors import StoreRefusedRun
from agent_health.model import EvalRun, RunReport, TestResult
from agent_health.model.encodable import encodable
from agent_health.model.runs import HEARTBEAT_S
from agent_health.offloop import DaemonThreadPool
from agent_health.reporters.base import OutputClosed, Reporter, ReportError
from agent_health.stores import ResultStore

_STOP = object()
_BATCH = 64  # results handed to the sink's thread at once, at most
_HANDOFF_S = 0.005  # how long a finished result may wait for others to go with it
_STORE_BATCH = 128  # results stored in one put_many, at most


def _make_encodable(batch: list[TestResult]) -> bool:
    """Escape the lone surrogates of every result of `batch` in place; True when any had one."""
    changed = False
    for i, result in enumerate(batch):
        clean = encodable(result)
        if clean is not result:
            batch[i] = clean  # the reporters get what was stored
            changed = True
    return changed


def _call(rep: Reporter, method: str, args: tuple[Any, ...]) -> BaseException | None:
    """Call a reporter's method; what it raised, if anything. A `SystemExit` too (rich's answer to
    a broken pipe, a plugin's `sys.exit()`): this thread must outlive every reporter."""
    try:
        getattr(rep, method)(*args)
    except BaseException as exc:  # a failing reporter must not end the run  # noqa: BLE001
        return exc
    return None


def _settle(future: Future[Any], value: Any = None, exc: BaseException | None = None) -> None:
    """Complete `future` unless its waiter gave up on it (cancelled it)."""
    try:
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(value)
    except InvalidStateError:
        pass


class _Room:
    """Places for finished results waiting to be stored and reported, kept on the loop's side.
    Taking a free place is a decrement (asyncio.Semaphore's acquire is a coroutine per result,
    and its release walks its waiters for every place given back); a result that finds none waits
    for one, first come first served, as on a semaphore."""

    def __init__(self, places: int):
        self.free = places
        self._waiting: deque[asyncio.Future[None]] = deque()

    def take_now(self) -> bool:
        """Take a free place if one is free and nobody waits for one."""
        if self.free > 0 and not self._waiting:
            self.free -= 1
            return True
        return False

    async def take(self) -> None:
        """Wait for a place."""
        place: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(place)
        try:
            await place
        except asyncio.CancelledError:
            if place.done() and not place.cancelled():  # given a place, then cancelled: it goes on
                self.give(1)
            raise
        finally:
            if place in self._waiting:
                self._waiting.remove(place)

    def give(self, places: int) -> None:
        """Places back: to the results waiting, in order, then free."""
        self.free += places
        while self.free > 0 and self._waiting:
            place = self._waiting.popleft()
            if not place.done():
                self.free -= 1
                place.set_result(None)


@dataclass(frozen=True)
class _Stored:
    """A writer thread has stored these results (or failed to): report them."""

    results: list[TestResult]


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
        self.closed: list[str] = []  # outputs whose reader went away (`OutputClosed`), said once each
        self.stored = 0
        self._store_failures = 0
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._max_pending = max_pending
        self._room: _Room | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._batch: list[TestResult] = []
        self._handoff: asyncio.TimerHandle | None = None
        writes = store.concurrent_writes if store is not None else 0  # 0: on this sink's own thread
        self._writers = DaemonThreadPool("agent-health-store") if writes > 0 else None
        self._max_in_flight = max(writes, 1)  # put_many calls in flight at once
        self._held: deque[Any] = deque()  # result lists and calls in order, waiting to be stored
        self._in_flight = 0  # batches being stored and not reported yet
        self._done = 0  # results reported whose room the loop has not got back yet
        self._finished = False
        self._beating = threading.Event()  # set: no more heartbeats

    @property
    def not_stored(self) -> int:
        """Results the store could not take, so far."""
        with self._lock:
            return self._store_failures

    def start(self) -> ResultSink:
        self._loop = asyncio.get_running_loop()
        self._room = _Room(self._max_pending)
        self._thread = threading.Thread(target=self._work, name="agent-health-results", daemon=True)
        self._thread.start()
        return self

    # -- the loop's side ------------------------------------------------------------------------
    async def put(self, result: TestResult) -> None:
        """Queue a finished result for the store and the reporters. Results reach the sink's
        thread in batches, at most `_HANDOFF_S` after they finished (or `_BATCH` at once): waking
        a thread for every result would cost the loop a GIL handoff each time."""
        assert self._room is not None and self._loop is not None
        if not self._room.take_now():
            await self._room.take()
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

    # -- from another thread, when the loop will not run again (it is stuck, or the process is
    # about to exit): each call waits at most `timeout_s` ---------------------------------------
    def call_blocking(self, timeout_s: float, fn: Callable[..., Any] = lambda: None, *args: Any) -> None:
        """Store and report what the loop had not handed over yet, then run `fn(*args)` on the
        sink's thread; wait for it at most `timeout_s`."""
        self._hand_over()
        done: Future[Any] = Future()
        self._queue.put((done, fn, args))
        try:
            done.result(timeout_s)
        except Exception:  # at most timeout_s, never raising: the process is on its way out  # noqa: BLE001
            pass

    def put_blocking(self, results: list[TestResult]) -> None:
        """Queue results for the store and the reporters (they follow what is queued already)."""
        self._hand_over()
        if results:
            self._queue.put(list(results))

    def agent_done_blocking(self, agent: str, timeout_s: float) -> None:
        self.call_blocking(timeout_s, self._each, "agent_done", agent)

    def finish_blocking(self, run: EvalRun, report: RunReport, timeout_s: float) -> None:
        """`finish`, from another thread (a second `finish` does nothing)."""
        self.call_blocking(timeout_s, self._finish, run, report)

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` on the sink's thread after everything queued before it."""
        self._hand_over()
        future: Future[Any] = Future()
        self._queue.put((future, fn, args))
        return await asyncio.wrap_future(future)

    async def open(self, run: EvalRun) -> None:
        """Write the run's manifest (status running); a StoreError when the store cannot take it
        (a missing bucket, refused credentials, an unwritable folder): a run must not spend on
        tests whose results could not be stored. Then, until the run ends, the manifest is
        written again every `HEARTBEAT_S` with its `heartbeat_at`, so a reader elsewhere can
        tell a run that stopped without writing its end (`EvalRun.as_seen`)."""
        await self.call(self._open, run)
        if self.store is not None:
            beats = threading.Thread(target=self._heartbeat, args=(run, HEARTBEAT_S), name="agent-health-heartbeat")
            beats.daemon = True
            beats.start()

    def _heartbeat(self, run: EvalRun, every: float) -> None:
        """Its own thread: queue a heartbeat every `every` s (the sink's thread writes it, in order
        with the results and before the final manifest, so it never overwrites the end)."""
        while not self._beating.wait(every):
            self._queue.put((Future(), self._beat, (run,)))

    async def begin(self, run: EvalRun, totals: dict[str, int]) -> None:
        """Tell the reporters the run starts (after `open` wrote its manifest)."""
        await self.call(self._begin, run, totals)

    async def agent_done(self, agent: str) -> None:
        await self.call(self._each, "agent_done", agent)

    async def finish(self, run: EvalRun, report: RunReport) -> None:
        """Rewrite the manifest with how the run ended and let the reporters finish."""
        await self.call(self._finish, run, report)

    async def close(self) -> None:
        self._beating.set()
        await self.call(lambda: None)
        self._queue.put(_STOP)
        if self._writers is not None:
            self._writers.shutdown(wait=False)

    # -- the sink's thread ----------------------------------------------------------------------
    # Results are stored in batches, on this thread or by up to `concurrent_writes` writer threads;
    # each stored batch comes back through the queue to be reported (a write on this thread puts
    # it there too, so what arrived meanwhile joins the next batch). A call (begin, agent_done,
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
                self._report(item.results)
            else:
                self._held.append(item)
            self._advance()

    def _advance(self) -> None:
        """Start what the held items allow, in order."""
        while self._held:
            if isinstance(self._held[0], list):  # results to store
                if self.store is None:  # no store: straight to the reporters
                    self._report(self._held.popleft())
                    continue
                if self._in_flight >= self._max_in_flight:
                    return  # go on when the batch in flight comes back
                self._in_flight += 1
                if self._writers is None:
                    self._store_batch(self._take_batch())
                else:
                    self._writers.submit(self._store_batch, self._take_batch())
                continue
            if self._in_flight:
                return  # a call runs once everything before it is stored and reported
            future, fn, args = self._held.popleft()
            # A call runs even when its caller stopped waiting (the run was cancelled meanwhile):
            # the manifest and the reports must still be written.
            try:
                value = fn(*args)
            except BaseException as exc:  # handed to the caller's future, as an executor does  # noqa: BLE001
                _settle(future, exc=exc)
            else:
                _settle(future, value)

    def _take_batch(self) -> list[TestResult]:
        """Up to `_STORE_BATCH` results from the held lists at the front (never past a call)."""
        batch: list[TestResult] = []
        while self._held and isinstance(self._held[0], list) and len(batch) < _STORE_BATCH:
            front = self._held[0]
            room = _STORE_BATCH - len(batch)
            batch += front[:room]
            del front[:room]
            if not front:
                self._held.popleft()
        return batch

    def _report(self, results: list[TestResult]) -> None:
        for result in results:
            self._each("result", result)
            result.forget_json()  # stored and reported: a result the caller keeps holds only its fields
        self._done += len(results)

    def _store_batch(self, batch: list[TestResult]) -> None:
        """Store a batch (on a writer thread or this one), then hand it back for reporting."""
        try:
            stored, failed = self._put(batch)
            with self._lock:
                self.stored += stored
                first = self._store_failures == 0 and bool(failed)
                self._store_failures += len(failed)
            if first:  # once: every later result would say the same
                self._error(f"{self._store_said(failed[0])}; the run goes on without it")
        except Exception as exc:  # the sink's thread must outlive it; the batch is still reported  # noqa: BLE001
            self.errors.append(f"result sink: {type(exc).__name__}: {exc}")
        finally:
            self._queue.put(_Stored(batch))

    def _put(self, batch: list[TestResult]) -> tuple[int, list[Exception]]:
        """Store `batch` in one `put_many`; when that fails, once more with its lone surrogates
        escaped (if it had any: text no UTF-8 writer takes), then each result alone, so one result
        never loses the others and the count of stored results stays true."""
        assert self.store is not None
        try:
            self.store.put_many(batch)
            return len(batch), []
        except Exception:  # any store failure: retried below  # noqa: BLE001
            pass
        if _make_encodable(batch):
            try:
                self.store.put_many(batch)
                return len(batch), []
            except Exception:  # any store failure: each result alone below  # noqa: BLE001
                pass
        stored, failed = 0, []
        for result in batch:
            try:
                self.store.put(result)
                stored += 1
            except Exception as exc:  # collected and reported: one result never loses the others  # noqa: BLE001
                failed.append(exc)
        return stored, failed

    def _release(self) -> None:
        n, self._done = self._done, 0
        if not n:
            return
        assert self._loop is not None and self._room is not None
        try:
            self._loop.call_soon_threadsafe(self._room.give, n)
        except RuntimeError:  # the loop is gone (the run was torn down)
            pass

    def _store_said(self, exc: Exception) -> str:
        """The store's error, naming the store once (a StoreError names it already)."""
        assert self.store is not None
        text = str(exc)
        return text if text.startswith("result store ") else f"result store {self.store.location}: {text}"

    def _error(self, message: str) -> None:
        self.errors.append(message)
        if self.on_error is not None:
            self.on_error(message)

    def _each(self, method: str, *args: Any) -> None:
        for rep in list(self.reporters):
            failure = _call(rep, method, args)
            if failure is not None and not isinstance(failure, OutputClosed):
                # text that cannot be UTF-8 (a lone surrogate): once more, escaped, before giving up
                clean = tuple(encodable(a) if isinstance(a, BaseModel) else a for a in args)
                if any(c is not a for c, a in zip(clean, args)):
                    args = clean  # the later reporters get the escaped copy too
                    failure = _call(rep, method, args)
            if failure is not None:
                self._drop(rep, failure)

    def _drop(self, rep: Reporter, exc: BaseException) -> None:
        self.reporters.remove(rep)
        try:
            rep.abort()
        except BaseException:  # cleanup must not mask the reporter's first error  # noqa: BLE001
            pass
        if isinstance(exc, OutputClosed):  # not the report's fault: said once, the exit code says it too
            if str(exc) not in self.closed:
                self.closed.append(str(exc))
            return
        message = str(exc) if isinstance(exc, ReportError) else f"reporter {rep.name}: {type(exc).__name__}: {exc}"
        self._error(f"{message}; its report is incomplete (results are still stored)")

    def _put_run(self, run: EvalRun, *, first: bool = False) -> None:
        if self.store is None:
            return
        try:
            try:
                self.store.put_run(run)
            except Exception:
                clean = encodable(run)
                if clean is run:
                    raise
                self.store.put_run(clean)
        except Exception as exc:  # reported; the run goes on (the first write stops it)  # noqa: BLE001
            if first:
                raise StoreRefusedRun(f"{self._store_said(exc)} (the run manifest); no test was run") from None
            self._error(f"{self._store_said(exc)} (the run manifest)")

    def _open(self, run: EvalRun) -> None:
        self._put_run(run, first=True)

    def _beat(self, run: EvalRun) -> None:
        if self._finished or self.store is None:
            return
        try:
            self.store.put_run(encodable(run.model_copy(update={"heartbeat_at": time.time()})))
        except Exception:  # a missed heartbeat: the next one tries again; result writes say what fails  # noqa: BLE001
            pass

    def _begin(self, run: EvalRun, totals: dict[str, int]) -> None:
        self._each("begin", run)
        for agent, total in totals.items():
            self._each("start", agent, total)

    def _finish(self, run: EvalRun, report: RunReport) -> None:
        if self._finished:  # the run was abandoned from another thread and finished there
            return
        self._finished = True
        self._beating.set()
        if self._store_failures > 1 and self.store is not None:
            self._error(f"result store {self.store.location}: {self._store_failures} results could not be stored")
        self._put_run(run)
        self._each("finish", report)
