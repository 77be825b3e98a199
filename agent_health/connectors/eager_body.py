"""Send an aiohttp request's body as soon as the request is made, on Python 3.11 too.

aiohttp writes a request's body in a task of its own. From Python 3.12 it starts that task
eagerly (`eager_start=True`), so a small body goes out with the headers before the caller's step
ends. On 3.11 the task waits for the event loop's next pass, behind every callback already ready:
with 64 agent runs in flight whose answers arrive together, each next request leaves only after
all 64 have been processed, so the runs stay in lock-step and every round of requests pays the
whole burst (about 1.1x the ideal wall time at 0.5 ms of CPU per test, where 3.12 stays near 1.02x;
see benchmarks/connectors_http.py).

`install(loop)` sets a task factory on the loop (the public `loop.set_task_factory`) that runs the
first step of aiohttp's body writer at once, as 3.12 does, and hands every other coroutine to the
factory that was there before (or to `asyncio.Task`). It does nothing on 3.12 and later, or where
aiohttp's writer is not found.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import weakref
from collections.abc import Coroutine, Generator
from typing import Any

import aiohttp

# The coroutine aiohttp schedules for a request body; matched by code object, so nothing else in
# the loop is started early.
_WRITER_CODE = getattr(getattr(aiohttp.ClientRequest, "write_bytes", None), "__code__", None)
_installed: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()

NEEDED = sys.version_info < (3, 12) and _WRITER_CODE is not None


def install(loop: asyncio.AbstractEventLoop) -> None:
    """Start aiohttp's body writers eagerly on `loop` (once per loop; a no-op where not needed)."""
    if not NEEDED or loop in _installed:
        return
    _installed.add(loop)
    previous = loop.get_task_factory()

    def factory(
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any] | Generator[Any, None, Any],
        context: contextvars.Context | None = None,
    ) -> asyncio.Future[Any]:
        if getattr(coro, "cr_code", None) is _WRITER_CODE:
            return _start_eagerly(loop, coro, context, previous)  # type: ignore[arg-type]  # cr_code: a coroutine
        if previous is None:
            return asyncio.Task(coro, loop=loop, context=context)
        if context is None:  # as the loop calls a factory: `context` only when the caller gave one
            return previous(loop, coro)
        return previous(loop, coro, context=context)  # type: ignore[call-arg]  # typeshed omits `context`

    loop.set_task_factory(factory)


def _start_eagerly(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, Any],
    context: contextvars.Context | None,
    previous: Any,
) -> asyncio.Future[Any]:
    """Run `coro`'s first step now, in its own context as a task's would be. Finished: a done future
    (aiohttp then keeps no writer). Waiting: a task that resumes it where it stopped."""
    ctx = context if context is not None else contextvars.copy_context()
    try:
        first = ctx.run(coro.send, None)
    except StopIteration as stop:
        done: asyncio.Future[Any] = loop.create_future()
        done.set_result(stop.value)
        return done
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 -- kept on the future, as a task would keep it
        failed: asyncio.Future[Any] = loop.create_future()
        failed.set_exception(exc)
        return failed
    rest = _resume(coro, first)
    if previous is not None:
        return previous(loop, rest, context=ctx)  # type: ignore[no-any-return]
    return asyncio.Task(rest, loop=loop, context=ctx)


async def _resume(coro: Coroutine[Any, Any, Any], yielded: Any) -> Any:
    return await _Resumed(coro, yielded)


class _Resumed:
    """Awaiting this continues a coroutine that was stepped by hand: the task first waits on what
    the coroutine's last step yielded, then sends (or throws) into it as it would have."""

    def __init__(self, coro: Coroutine[Any, Any, Any], yielded: Any):
        self.coro = coro
        self.yielded = yielded

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, yielded = self.coro, self.yielded
        while True:
            sent, thrown = None, None
            try:
                sent = yield yielded
            except BaseException as exc:  # noqa: BLE001 -- cancellation and errors go to the coroutine
                thrown = exc
            try:
                yielded = coro.send(sent) if thrown is None else coro.throw(thrown)
            except StopIteration as stop:
                return stop.value
