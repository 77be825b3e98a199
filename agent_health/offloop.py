"""Keeping user code and blocking I/O off the event loop.

Every sync callable a run meets (fixtures, hooks, bodies, analyzers, custom evaluators, insight
synthesizers) and every blocking call (trace fetches, store writes, the judge cache) goes through
`call` or `run_off_loop`, which run it in a worker thread that sees the caller's context variables.

The worker threads are daemon threads, never joined at exit: a sync body that never returns is
abandoned at its test's timeout and cannot keep the process alive (`ThreadPoolExecutor` joins its
threads at interpreter exit, which is why it is not used). `use_daemon_threads(loop)` makes a pool
of them the loop's default executor, so `asyncio.to_thread` uses it too.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import itertools
import queue
import threading
import types
from collections.abc import Awaitable, Callable, Generator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

_IDLE_S = 30.0  # an idle worker thread retires after this long


class DaemonThreadPool(ThreadPoolExecutor):
    """An executor whose daemon threads grow on demand (one per call in flight, no fixed cap: the
    run's concurrency bounds the calls) and retire when idle. `shutdown()` never waits: a thread
    stuck in user code is abandoned, not joined.

    It is a `ThreadPoolExecutor` only because asyncio accepts nothing else as a loop's default
    executor; `submit` and `shutdown` are its own, so none of the base class's (joined) worker
    threads ever start."""

    def __init__(self, name: str = "agent-health", idle_s: float = _IDLE_S):
        super().__init__(max_workers=1, thread_name_prefix=name)
        self._name = name
        self._idle_s = idle_s
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None]
        self._work = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)  # one token per idle worker
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()
        self._ids = itertools.count(1)
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._work.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False):
                thread = threading.Thread(target=self._worker, name=f"{self._name}-{next(self._ids)}", daemon=True)
                self._threads.add(thread)
                thread.start()
        return future

    def _worker(self) -> None:
        me = threading.current_thread()
        try:
            while True:
                try:
                    item = self._work.get(timeout=self._idle_s)
                except queue.Empty:
                    if self._idle.acquire(blocking=False):  # retire; else a call is on its way to us
                        return
                    continue
                if item is None:
                    return
                future, fn, args, kwargs = item
                del item
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(fn(*args, **kwargs))
                    except BaseException as exc:  # the caller sees it, as with any executor  # noqa: BLE001
                        future.set_exception(exc)
                del future, fn, args, kwargs
                self._idle.release()
        finally:
            with self._lock:
                self._threads.discard(me)

    @property
    def threads(self) -> int:
        """Worker threads alive now (busy, idle or abandoned)."""
        with self._lock:
            return len(self._threads)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop the idle workers; never joins a thread (`wait` is accepted and ignored)."""
        with self._lock:
            self._closed = True
            if cancel_futures:
                while True:
                    try:
                        item = self._work.get_nowait()
                    except queue.Empty:
                        break
                    if item is not None:
                        item[0].cancel()
            for _ in range(len(self._threads)):
                self._work.put(None)


def use_daemon_threads(loop: asyncio.AbstractEventLoop, name: str = "agent-health") -> DaemonThreadPool:
    """Make a daemon thread pool `loop`'s default executor (for `run_in_executor(None, ...)` and
    `asyncio.to_thread`); returns it."""
    pool = DaemonThreadPool(name)
    loop.set_default_executor(pool)
    return pool


async def run_off_loop(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` in a worker thread of the loop's default executor, with the caller's
    context variables (the running test's context)."""
    ctx = contextvars.copy_context()
    call = functools.partial(ctx.run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(None, call)


def is_async_callable(fn: Any) -> bool:
    """A coroutine function, or an object whose `__call__` is one."""
    # an `async def` function (every test body of a data file, most of a code file's) tells by
    # its code's flag: inspect's check unwraps methods and partials first, 2 us a test
    if type(fn) is types.FunctionType and fn.__code__.co_flags & inspect.CO_COROUTINE:
        return True
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


async def call(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Call a user function without blocking the loop: coroutine functions are awaited on it, sync
    functions run in a worker thread; an awaitable a sync function returns is awaited here."""
    if is_async_callable(fn):
        return await fn(*args, **kwargs)
    result = await run_off_loop(fn, *args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


def start_eagerly(awaitable: Awaitable[Any]) -> tuple[bool, Any]:
    """Run a coroutine's first step now, in the calling task: `(True, its value)` when it finished
    without waiting, else `(False, an awaitable of the rest)`. A timeout needs arming only for
    what waits: a timer costs a handle, a heap push and a cancel, and most analyses (and agents
    that answer at once, such as a replay) never wait. Other awaitables are returned unstarted."""
    if type(awaitable) is not types.CoroutineType:
        return False, awaitable
    try:
        waits_on = awaitable.send(None)
    except StopIteration as stop:
        return True, stop.value
    return False, _Rest(awaitable, waits_on)


class _Rest:
    """The rest of a coroutine whose first step ran (`start_eagerly`): awaiting it hands what the
    coroutine waits on to the task, then resumes it, as `await` would have."""

    def __init__(self, coro: types.CoroutineType[Any, Any, Any], waits_on: Any):
        self._coro, self._waits_on = coro, waits_on

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, waits_on = self._coro, self._waits_on
        while True:
            try:
                sent = yield waits_on
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a cancellation (or anything thrown in) goes to the coroutine  # noqa: BLE001
                try:
                    waits_on = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    waits_on = coro.send(sent)
                except StopIteration as stop:
                    return stop.value
