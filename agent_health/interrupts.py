"""Telling a stop the harness must obey from a BaseException that test or agent code raised.

A run stops for a real SIGINT or SIGTERM delivered to the process, for the cancellation that
follows it, and for the exceptions agent-health itself raises into running user code (`HarnessStop`:
the loop watchdog's `LoopBlocked`, `Interrupted`). Anything else test, fixture, hook, agent or
eval-file code raises, `sys.exit()`, `raise KeyboardInterrupt` and `BaseException` subclasses
included, ends only that test (errored, naming the exception) or that file (a load error).

An exception raised by an installed signal handler (Python's own SIGINT handler raising
KeyboardInterrupt through asyncio, a host such as Dagster turning SIGTERM into its interrupt
error, a test runner's timeout) counts as a real stop: it is told apart by the handler's frame in
its traceback, never by its type.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

_PKG = str(Path(__file__).resolve().parent)


class HarnessStop(BaseException):  # BaseException: a body's `except Exception` must not swallow it
    """Raised by agent-health into running user code to stop it; never the test's own error."""


class Interrupted(HarnessStop):
    """A real SIGINT or SIGTERM delivered to the process (raised by agent-health's handlers)."""

    def __init__(self, signame: str):
        self.signame = signame
        super().__init__(f"interrupted ({signame})")


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


@contextlib.contextmanager
def real_ctrl_c() -> Iterator[None]:
    """Inside, a real Ctrl-C raises `Interrupted("SIGINT")` instead of KeyboardInterrupt, so code
    that imports eval files tells it from a `raise KeyboardInterrupt` of theirs (a load error).
    Outside the main thread it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _handler_code(handler: Any) -> CodeType | None:
    while hasattr(handler, "func"):  # functools.partial (asyncio's own SIGINT handler is one)
        handler = handler.func
    handler = getattr(handler, "__func__", handler)  # a bound method
    return getattr(handler, "__code__", None)


def _installed_handlers() -> set[CodeType]:
    codes = set()
    for sig in signal.valid_signals():
        try:
            code = _handler_code(signal.getsignal(sig))
        except (ValueError, OSError):
            continue
        if code is not None:
            codes.add(code)
    return codes


def raised_by_signal_handler(exc: BaseException) -> bool:
    """True when `exc` was raised inside a Python signal handler installed now (a real signal)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    handlers = _installed_handlers()
    while tb is not None:
        if tb.tb_frame.f_code in handlers:
            return True
        tb = tb.tb_next
    return False


def must_propagate(exc: BaseException) -> bool:
    """True for a stop the harness obeys: its own `HarnessStop`, a cancellation of the running
    task, or anything a signal handler raised. False for what user code raised itself (then
    `describe` names it and only the test or file fails)."""
    if isinstance(exc, HarnessStop):
        return True
    if not isinstance(exc, BaseException) or isinstance(exc, Exception):
        return False
    asyncio = sys.modules.get("asyncio")  # no cancellation without asyncio loaded
    if asyncio is not None and isinstance(exc, asyncio.CancelledError):
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no running loop: not a task's cancellation
            task = None
        # a real cancellation; a body raising CancelledError itself (nothing cancelling) is its own error
        return task is None or task.cancelling() > 0
    return raised_by_signal_handler(exc)


def _hint(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return "sys.exit() in an eval file, a test, a fixture or an agent never ends the run"
    if isinstance(exc, KeyboardInterrupt):
        return "raised by code, not a Ctrl-C: it never ends the run"
    if isinstance(exc, Exception):
        return ""
    return "a BaseException subclass; raise an Exception subclass for errors"


def where(exc: BaseException) -> str:
    """'file.py:12: ' of the innermost frame outside agent-health and asyncio, or ''."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if not frame.filename.startswith(_PKG) and "asyncio" not in frame.filename:
            return f"{Path(frame.filename).name}:{frame.lineno}: "
    return ""


def describe(exc: BaseException, located: bool = True) -> str:
    """One line naming what user code raised (and where, when `located`):
    `a.eval.py:5: SystemExit: 0 (sys.exit() in an eval file, a test, ... never ends the run)`."""
    text = str(exc)
    hint = _hint(exc)
    head = f"{where(exc) if located else ''}{type(exc).__name__}"
    return f"{head}{': ' + text if text else ''}{f' ({hint})' if hint else ''}"
