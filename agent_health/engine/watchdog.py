"""The loop watchdog: finds the test whose async code blocks the event loop, fails it, and keeps
the blocked time off the other tests' timeouts.

A heartbeat callback on the loop stamps the time every `beat_s`. A daemon thread watches the
stamp; when the loop has not beaten for `stall_s`, it reads the loop thread's current stack
(`sys._current_frames()`, public stdlib API) to find the test running there (every trial runs
inside `Watchdog.guard`, whose frame marks it) and the blocking call site (the innermost frame in
user code). Once that test is past its timeout:

- when the loop runs in the main thread, the watchdog interrupts it with a signal whose handler
  raises `LoopBlocked` inside that test's own code only (a blocking `time.sleep` or a busy loop
  ends there); the test is reported failed naming the test and the call site;
- if the loop stays blocked `grace_s` longer, `on_stuck` (given by the CLI) is told, so the process
  can exit instead of hanging;
- when the block ends by itself, the test is failed the same way.

Code that holds the interpreter lock the whole time (a catastrophic regular expression, a long
C computation) starves that thread, so the loop also arms a CPU-time timer (`ITIMER_PROF`) on each
beat: when the process burns `tick_s` of CPU without the loop beating, SIGPROF's handler runs in
the blocking code itself (the regular-expression engine checks for signals) and does the same
checks there. With `on_stuck`, the loop also keeps a last-resort exit armed with Python's
faulthandler (a C thread that needs no lock): if the loop has not beaten by `grace_s + backstop_s`
past the latest deadline the run has set (every trial's timeout from the moment it is watched,
its teardown's and its analysis's), the process prints every thread's stack and exits 1. Nothing
in flight, nothing armed: harness work after the last test is never cut short, unless the code of
a test abandoned at its timeout may still be running (`abandoned`), when the exit also waits
that long past the loop's last beat.

When the loop beats again after a stall, every other test's deadline moves by the stalled time,
so they are not charged the blocked time as their own timeout.
"""

from __future__ import annotations

import asyncio
import faulthandler
import linecache
import os
import signal
import sys
import sysconfig
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from agent_health.interrupts import HarnessStop, Interrupted

T = TypeVar("T")

_PKG = str(Path(__file__).resolve().parents[1])
_STDLIB = tuple({sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})
_SIGNAL = getattr(signal, "SIGUSR2", None)
_TICK = getattr(signal, "SIGPROF", None)
_REARM_BACKSTOP_S = 1.0  # how often the loop pushes the last-resort exit further away


class LoopBlocked(HarnessStop):
    """Raised inside a test's code that blocked the event loop past the test's timeout."""


def _is_user_frame(frame: FrameType) -> bool:
    name = frame.f_code.co_filename
    return not (
        name.startswith(_PKG) or name.startswith(_STDLIB) or "site-packages" in name or name.startswith("<frozen")
    )


def _site(frame: FrameType) -> str:
    code = frame.f_code
    lineno = frame.f_lineno or code.co_firstlineno  # None while a frame is being set up or torn down
    line = linecache.getline(code.co_filename, lineno).strip()
    where = f"{Path(code.co_filename).name}:{lineno} in {code.co_name}"
    return f"{where} ({line})" if line else where


@dataclass(eq=False)
class Watch:
    """One test trial under watch."""

    test: str
    timeout_s: float
    scope: asyncio.Timeout | None = None  # the trial's timeout, once armed (when it first waits)
    deadline: float | None = None  # loop time: the trial's deadline before its timeout is armed
    blocked_s: float = 0.0  # longest loop stall caused by this trial
    site: str | None = None
    interrupted: bool = False
    _stall_started: float | None = field(default=None, repr=False)
    _interrupt_sent: float | None = field(default=None, repr=False)

    def over_deadline(self, now: float) -> bool:
        when = self.scope.when() if self.scope is not None else self.deadline
        return when is not None and now > when

    def message(self) -> str:
        where = f" at {self.site}" if self.site else ""
        return (
            f"test {self.test!r} blocked the event loop for {self.blocked_s:.1f}s{where}, past its "
            f"{self.timeout_s:g}s timeout; an async test must await instead of blocking (run blocking "
            "calls in a sync `def` test or with `await asyncio.to_thread(...)`)"
        )


class Watchdog:
    """Watches one event loop. Start it on the loop's thread; stop it before the loop closes."""

    def __init__(
        self,
        *,
        beat_s: float = 0.05,
        stall_s: float = 0.2,
        grace_s: float = 2.0,
        interrupt: bool = True,
        on_stuck: Callable[[str], None] | None = None,
        tick_s: float = 0.25,
        backstop_s: float = 5.0,
    ):
        self.beat_s, self.stall_s, self.grace_s = beat_s, stall_s, grace_s
        self.tick_s, self.backstop_s = tick_s, backstop_s
        self.on_stuck = on_stuck
        self._want_interrupt = interrupt
        self._frames: dict[FrameType, Watch] = {}
        self._active: set[Watch] = set()
        self._blamed: Watch | None = None
        self._to_interrupt: Watch | None = None
        self._last_beat = time.monotonic()
        self._expected = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._handle: asyncio.TimerHandle | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous_handler: Any = None
        self._can_interrupt = False
        self._previous_tick: Any = None
        self._ticking = False
        self._backstop_at = 0.0  # when the loop last re-armed (or disarmed) the last-resort exit
        self._armed_at = 0.0  # the loop time the last-resort exit is armed for (0: not armed)
        self._until = 0.0  # the latest deadline (loop time) set outside the watched trials (teardowns)
        self._abandoned = False  # a test's code was abandoned at its timeout and may still be running
        self._stopping: str | None = None  # the signal that asked the run to stop
        self._stuck_told = False

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> Watchdog:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        if self._want_interrupt and _SIGNAL is not None and threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(_SIGNAL, self._on_signal)
            self._can_interrupt = True
            if _TICK is not None and signal.getsignal(_TICK) in (signal.SIG_DFL, None):  # a profiler's is kept
                self._previous_tick = signal.signal(_TICK, self._on_tick)
                self._ticking = True
        self._last_beat = time.monotonic()
        self._expected = self._loop.time() + self.beat_s
        self._handle = self._loop.call_later(self.beat_s, self._beat)
        if self._ticking:  # armed now: a test may block the loop before its first beat
            signal.setitimer(signal.ITIMER_PROF, self.tick_s)
        self._thread = threading.Thread(target=self._watch, name="agent-health-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
        if self._can_interrupt:
            signal.signal(_SIGNAL, self._previous_handler)  # type: ignore[arg-type]
            self._can_interrupt = False
        if self._ticking:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(_TICK, self._previous_tick)  # type: ignore[arg-type]
            self._ticking = False
        if self._armed_at:
            faulthandler.cancel_dump_traceback_later()
            self._armed_at = 0.0

    def blocking_trial(self, frame: FrameType | None) -> Watch | None:
        """The trial whose code runs in `frame` (a signal handler's) while the loop is stalled."""
        if time.monotonic() - self._last_beat < self.stall_s:
            return None
        return self._culprit(frame)[0]

    # -- trials -------------------------------------------------------------------------------
    def watch(self, test: str, timeout_s: float, deadline: float | None = None) -> Watch:
        """Watch a trial from now, due by `deadline` (loop time; default `timeout_s` from now) until
        its timeout is armed (`Watch.scope`); the last-resort exit waits past that deadline (a
        trial may block the loop, or hold the interpreter, before the loop beats again, or before
        its timeout is armed: a trial runs until it first waits before it gets one)."""
        if deadline is None and self._loop is not None:
            deadline = self._loop.time() + timeout_s
        w = Watch(test, timeout_s, deadline=deadline)
        self._active.add(w)
        if deadline is not None:
            self.expect(deadline)
        return w

    def expect(self, deadline: float) -> None:
        """A deadline (loop time) the run has set, such as a trial's teardown budget: the
        last-resort exit never fires before it, plus the grace. Only ever moves the exit later,
        and re-arms it at most once per `_REARM_BACKSTOP_S` of deadlines (each arming starts a
        thread in faulthandler)."""
        self._until = max(self._until, deadline)
        fire = deadline + self._margin()
        if self.on_stuck is not None and self._loop is not None and not self._stop.is_set() and fire > self._armed_at:
            self._arm_backstop_at(fire + _REARM_BACKSTOP_S)

    def abandoned(self) -> None:
        """A trial's code was abandoned at its timeout (a sync body, hook or analyzer cannot be
        stopped) and may still run: from now on the last-resort exit also covers the times when
        no test is in flight, firing when the loop has not beaten for the grace."""
        self._abandoned = True

    def unwatch(self, w: Watch) -> None:
        self._active.discard(w)
        if self._to_interrupt is w:
            self._to_interrupt = None

    async def guard(self, w: Watch, awaitable: Awaitable[T]) -> T:
        """Await `awaitable` as trial `w`: this frame is how the watchdog finds the trial."""
        frame = sys._getframe()  # inspect.currentframe() is this behind a Python call
        self._frames[frame] = w
        try:
            return await awaitable
        finally:
            del self._frames[frame]
            # A frame holding itself in a local is a cycle: without this, every trial's frame (and
            # the coroutine and objects it holds) waited for the garbage collector.
            del frame

    # -- on the loop --------------------------------------------------------------------------
    def _beat(self) -> None:
        assert self._loop is not None
        now = self._loop.time()
        gap = now - self._expected
        self._last_beat = time.monotonic()
        if gap > 0.1:  # the loop was blocked: give everyone else their time back
            blamed = self._blamed
            if blamed is not None:
                blamed.blocked_s = max(blamed.blocked_s, gap)
                blamed._stall_started = None
            for w in list(self._active):
                if w is blamed or w.scope is None:
                    continue
                when = w.scope.when()
                if when is not None:
                    try:
                        w.scope.reschedule(when + gap)
                    except RuntimeError:  # already expired or left
                        pass
        self._blamed = None
        self._expected = now + self.beat_s
        if self._stop.is_set():
            return
        self._handle = self._loop.call_later(self.beat_s, self._beat)
        if self._ticking:
            signal.setitimer(signal.ITIMER_PROF, self.tick_s)
        if self.on_stuck is not None and self._last_beat - self._backstop_at > _REARM_BACKSTOP_S:
            self._rearm_backstop(now)

    def _margin(self) -> float:
        """How long past a deadline the last-resort exit waits: the watchdog's own grace (the
        interrupt, then `on_stuck` ending the run), then the backstop."""
        return self.grace_s + self.backstop_s

    def _rearm_backstop(self, now: float) -> None:
        """From a beat: the last-resort exit past the latest deadline still ahead (the trials in
        flight, whose deadlines move when the loop was blocked by another; teardowns) by the
        margin and the re-arming period; none when nothing has a deadline ahead."""
        self._backstop_at = time.monotonic()
        ahead = [self._until] if self._until > now else []
        if self._abandoned:  # abandoned code may take the interpreter for good: a margin past this beat
            ahead.append(now)
        for w in list(self._active):
            when = w.scope.when() if w.scope is not None else None
            ahead.append(when if when is not None else now + w.timeout_s)
        if ahead:
            self._arm_backstop_at(max(ahead) + self._margin() + _REARM_BACKSTOP_S)
        elif self._armed_at:
            faulthandler.cancel_dump_traceback_later()
            self._armed_at = 0.0

    def _arm_backstop_at(self, at: float) -> None:
        assert self._loop is not None
        self._backstop_at = time.monotonic()
        self._armed_at = at
        faulthandler.dump_traceback_later(max(at - self._loop.time(), 0.001), exit=True)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        w = self._to_interrupt
        f = frame
        while w is not None and f is not None:
            if self._frames.get(f) is w:  # only ever raise inside the blocking trial's own code
                self._to_interrupt = None
                w.interrupted = True
                raise self._stop_exception(w)
            f = f.f_back
        previous = self._previous_handler
        if w is None and callable(previous):
            previous(signum, frame)

    def _on_tick(self, signum: int, frame: FrameType | None) -> None:
        """SIGPROF: the process burnt `tick_s` of CPU since the loop's last beat. When the loop is
        stalled by a trial running here, do the watchdog thread's checks (it may be starved)."""
        now = time.monotonic()
        if now - self._last_beat < self.stall_s or not self._ticking:
            return  # the loop is beating (other threads burnt the CPU); the next beat re-arms
        w, site = self._culprit(frame)
        if w is not None:
            self._note_stall(w, site, now)
            if (w.over_deadline(now) or self._stopping) and not w.interrupted:
                w.interrupted = True
                raise self._stop_exception(w)
        signal.setitimer(signal.ITIMER_PROF, self.tick_s)

    def _stop_exception(self, w: Watch) -> HarnessStop:
        """What to raise in a trial blocking the loop: the run's stop signal, else LoopBlocked."""
        return Interrupted(self._stopping) if self._stopping else LoopBlocked(w.message())

    def request_stop(self, signame: str) -> None:
        """The run was told to stop (a real SIGINT/SIGTERM): a trial that blocks the loop now or
        later gets `Interrupted` raised in its code, so the loop can run the cancellation."""
        self._stopping = signame

    def _note_stall(self, w: Watch, site: str | None, now: float) -> None:
        self._blamed = w
        if w._stall_started is None:
            w._stall_started = self._last_beat
        w.blocked_s = max(w.blocked_s, now - w._stall_started)
        w.site = w.site or site

    # -- on the watchdog thread -----------------------------------------------------------------
    def _culprit(self, frame: FrameType | None = None) -> tuple[Watch | None, str | None]:
        """The trial running in `frame` (default: the loop thread's current frame) and its
        blocking call site."""
        if frame is None:
            frame = sys._current_frames().get(self._loop_thread)
        innermost = frame
        site = None
        while frame is not None:
            w = self._frames.get(frame)
            if w is not None:
                if site is None and innermost is not None:
                    site = _site(innermost)
                return w, site
            if site is None and _is_user_frame(frame):
                site = _site(frame)
            frame = frame.f_back
        return None, None

    def _watch(self) -> None:
        while not self._stop.wait(self.beat_s):
            now = time.monotonic()
            stalled = now - self._last_beat
            if stalled < self.stall_s:
                continue
            w, site = self._culprit()
            if w is None:
                continue
            self._note_stall(w, site, now)
            if not (w.over_deadline(now) or self._stopping):
                continue
            if w._interrupt_sent is None:
                w._interrupt_sent = now
                if self._can_interrupt and _SIGNAL is not None:
                    self._to_interrupt = w
                    signal.pthread_kill(threading.main_thread().ident or 0, _SIGNAL)
            elif now - w._interrupt_sent > self.grace_s and self.on_stuck is not None and not self._stuck_told:
                self._stuck_told = True
                self.on_stuck(w.message() + f"; it could not be interrupted (pid {os.getpid()})")
