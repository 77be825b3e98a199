"""Ending a run from outside its event loop: from a signal handler, or from another thread when
the loop itself cannot run any more.

The process that owns a run (the CLI) makes a `RunControl` and passes it to
`run_evaluation(control=...)`. `interrupt(reason)` stops the run the ordinary way: the tests in
flight end `errored` with the reason, the manifest says `interrupted`, every report is finished.
`abandon(reason, timeout_s)` is for when that cannot happen because the loop is stuck: from
another thread it stores and reports what finished, reports the tests still running as
`errored` with the reason, writes the manifest (`interrupted`) and finishes the reports, within
`timeout_s`; the caller then exits the process.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from agent_health.engine import Watchdog
    from agent_health.session.run import RunOutcome


class RunControl:
    """See the module docstring. One per run; the run attaches itself while it runs."""

    def __init__(self) -> None:
        self.reason: str | None = None  # why the run was told to stop, once it was
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[object] | None = None
        self._abandon: Callable[[str, float], None] | None = None
        self._watchdog: Watchdog | None = None
        self._abandoning = threading.Lock()
        self._signame = "stop"
        self.outcome: RunOutcome | None = None  # how the run ended, once its manifest is written

    # -- the run's side -------------------------------------------------------------------------
    def attach(self, abandon: Callable[[str, float], None], watchdog: Watchdog) -> None:
        """Called by the run on its loop, in its task, before the first test starts."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._abandon, self._watchdog = abandon, watchdog
        if self.reason is not None:  # told to stop while the run was being set up
            watchdog.request_stop(self._signame)
            self._cancel()

    def detach(self) -> None:
        self._task = None
        self._abandon = None
        self._watchdog = None

    # -- the owner's side -----------------------------------------------------------------------
    def interrupt(self, reason: str, signame: str | None = None) -> bool:
        """Stop the run as interrupted, with `reason` (safe in a signal handler and from any
        thread); a test blocking the loop meanwhile gets `Interrupted(signame)` raised in its
        code. False when the run was told to stop already."""
        if self.reason is not None:
            return False
        self.reason = reason
        self._signame = signame or "stop"
        watchdog = self._watchdog
        if watchdog is not None:
            watchdog.request_stop(self._signame)
        self._cancel()
        return True

    def _cancel(self) -> None:
        loop, task = self._loop, self._task
        if loop is None or task is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(task.cancel)
        except RuntimeError:  # the loop closed meanwhile: the run is over
            pass

    def blocked_by_test(self, frame: FrameType | None) -> bool:
        """True when the code running in `frame` (a signal handler's) is a test blocking the
        event loop: only raising into it lets the loop run again."""
        watchdog = self._watchdog
        return watchdog is not None and watchdog.blocking_trial(frame) is not None

    def abandon(self, reason: str, timeout_s: float) -> bool:
        """From a thread other than the loop's, when the loop will not run again: see the module
        docstring. False when the run is not running (or was abandoned already)."""
        abandon = self._abandon
        if abandon is None or not self._abandoning.acquire(blocking=False):
            return False
        self.reason = self.reason or reason
        abandon(reason, timeout_s)
        return True
