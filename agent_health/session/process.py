"""Running an evaluation as the work of the whole process (the CLI's `run` and `rejudge`).

- A real SIGINT or SIGTERM ends the run as interrupted: the tests in flight end `errored`
  ("did not finish: SIGTERM received"), every result and report is written, the manifest says
  `interrupted`, and the caller exits 130 or 143. If the run has not ended `STOP_S` seconds after
  the signal (the loop is stuck in code that cannot be interrupted), it is abandoned the same way
  from another thread and the process exits; a second signal exits at once. A signal that arrives
  while a test blocks the event loop is raised inside that test, so the loop can run again.
- Test code cannot stop the event loop: `loop.stop()` in a test raises there (the test errors).
  `run_loop` is the one way the engine's loop is run, by every transport (`agent-health run`
  through `run_owned`, `rejudge`, `run_tests`, and the Dagster steps through `agent_health.pipeline`),
  so this holds wherever tests run.
- `exit_leaving_threads(code)`: threads that test or agent code started and left running do not
  keep the process alive after the run; they get `THREADS_S` seconds to end, then the process
  exits without them, saying so.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from agent_health.capabilities.context import running_test
from agent_health.interrupts import Interrupted
from agent_health.session.control import RunControl

if TYPE_CHECKING:  # session.run runs its loop with RunLoop from here
    from agent_health.session.run import RunOutcome

STOP_S = 5.0  # after SIGINT or SIGTERM the process is gone within this, however stuck the run is
THREADS_S = 2.0  # how long threads left running by test code get to end after the run
EXIT_CODES = {"SIGINT": 130, "SIGTERM": 128 + 15}  # the shell's codes for a process ended so

_BaseLoop: type[asyncio.AbstractEventLoop] = (
    getattr(asyncio, "ProactorEventLoop", asyncio.SelectorEventLoop)
    if sys.platform == "win32"
    else asyncio.SelectorEventLoop
)


class RunLoop(_BaseLoop):  # type: ignore[valid-type,misc]
    """The run's event loop: `stop()` from test code raises in that code instead of stopping it."""

    def stop(self) -> None:
        if running_test() is not None:
            raise RuntimeError(
                "a test cannot stop the run's event loop (loop.stop() in test code); it ends only this test"
            )
        super().stop()


T = TypeVar("T")


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` (the engine: `run_evaluation`, `rejudge_results`) to its end on a new `RunLoop`
    and close the loop: what every transport runs the engine with (`asyncio.run` would give test
    code a loop it can stop, ending the run with a traceback and erroring the tests in flight)."""
    with asyncio.Runner(loop_factory=RunLoop) as runner:
        return runner.run(main)


def flush_output() -> None:
    """Write out what this process buffered (spans, log handlers, stdout and stderr) before an
    exit that skips the interpreter's own shutdown (`os._exit`)."""
    spans = sys.modules.get("agent_health.traces.local")
    if spans is not None:
        try:
            spans.flush_all()
        except Exception:  # a full disk was reported where it happened  # noqa: BLE001
            pass
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # about to os._exit: a broken stream must not stop it  # noqa: BLE001
            pass


def _exit(code: int) -> NoReturn:
    flush_output()
    os._exit(code)


def run_owned(main: Callable[[RunControl], Coroutine[Any, Any, RunOutcome]]) -> RunOutcome:
    """Run `main(control)` (a `run_evaluation(..., control=control)`) on a `RunLoop` as the
    process's run (see the module docstring): its outcome, whose manifest says `interrupted` when
    a signal stopped it. Call it from the main thread."""
    control = RunControl()
    asked = threading.Event()  # a signal asked the run to stop
    over = threading.Event()  # the run is over (normally or not)
    signame: list[str] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if not control.interrupt(f"{name} received", name):  # the second signal: leave now
            control.abandon(f"{name} received twice", 1.0)
            _exit(EXIT_CODES.get(signame[0] if signame else name, 1))
        signame.append(name)
        asked.set()
        if control.blocked_by_test(frame):  # the loop cannot run the cancellation: free it first
            raise Interrupted(name)

    def deadline() -> None:
        asked.wait()
        if over.wait(STOP_S):
            return
        name = signame[0] if signame else "SIGTERM"
        sys.stderr.write(f"error: the run did not stop within {STOP_S:g}s of {name}; exiting\n")
        control.abandon(f"{name} received; the run did not stop within {STOP_S:g}s", 2.0)
        _exit(EXIT_CODES.get(name, 1))

    threading.Thread(target=deadline, name="agent-health-stop-deadline", daemon=True).start()
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            outcome: RunOutcome | None = run_loop(main(control))
        except asyncio.CancelledError:
            if not signame:
                raise
            outcome = control.outcome
        # a signal after the final manifest was written changes nothing: the run finished
        if outcome is None or (signame and outcome.run.status == "interrupted"):
            raise Interrupted(signame[0] if signame else "SIGTERM")
        return outcome
    finally:
        over.set()
        asked.set()  # the deadline thread ends
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def exit_leaving_threads(code: int) -> NoReturn:
    """Exit with `code`. Threads other code left running (test or agent code: agent-health's own
    are daemon threads) get `THREADS_S` seconds to end; then the process exits without waiting
    for them, naming them, instead of hanging in the interpreter's shutdown."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    until = time.monotonic() + THREADS_S
    for t in others:
        t.join(max(0.0, until - time.monotonic()))
    alive = [t.name for t in others if t.is_alive()]
    if not alive:
        sys.exit(code)
    sys.stderr.write(
        f"warning: {len(alive)} thread(s) started by test or agent code are still running "
        f"({', '.join(alive[:5])}{', ...' if len(alive) > 5 else ''}); exiting without waiting for them\n"
    )
    _exit(code)
