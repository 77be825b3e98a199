"""The reporter contract. The run function calls every method from one thread, in this order:
`begin(run)` once before any test runs (open files here), `start(agent, total)` for every agent
version, `result(r)` for each result the moment it finishes (results of several agent versions
interleave: they share one concurrency limit), `agent_done(agent)` when an agent version's last
test finished, and `finish(report)` once at the end.

A reporter that needs every result at the end leaves `keeps_results` True: `finish(report)` then
gets them in `report.results`, which keeps them all in memory. A streaming reporter sets it to
False; its `finish(report)` gets the summaries only, and memory stays flat in the number of tests.
A reporter that cannot write raises `ReportError` naming itself and its file: the run goes on,
results still go to the store, and the CLI exits 2 at the end. A reporter whose stdout (or
stderr) was closed by its reader (`agent-health run | head -1`) raises `OutputClosed`
(`closed_output` makes it): reporting there ends quietly, the run goes on, and the CLI exits 141.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TextIO

from agent_health.errors import AgentHealthError
from agent_health.model import EvalRun, RunReport, TestResult


class ReportError(AgentHealthError):
    """A report cannot be written; the message names the reporter and the file."""


class OutputClosed(ReportError):
    """The reader of a reporter's stdout or stderr went away (a broken pipe): not a failure of the
    run or of the report's content. The reporter gets no more calls; the run goes on."""


def closed_output(stream: TextIO) -> OutputClosed:
    """After a broken pipe on `stream` (stdout or stderr): point its descriptor, and stdout's or
    stderr's when it is the same pipe (`2>&1 | head`), at the null device, so that what is still
    written there (another reporter, the last messages, the flush at exit) goes nowhere instead of
    failing; the error for the reporter to raise."""
    try:
        fd = stream.fileno()
        broken = os.fstat(fd)
    except (OSError, ValueError):  # not a real descriptor (a test's stream): nothing to point elsewhere
        return OutputClosed(f"{getattr(stream, 'name', 'the output')} was closed by its reader (broken pipe)")
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for std in {fd, 1, 2}:
            try:
                same = os.path.samestat(os.fstat(std), broken)
            except OSError:
                continue
            if same:
                os.dup2(null, std)
    finally:
        os.close(null)
    name = {1: "stdout", 2: "stderr"}.get(fd) or str(getattr(stream, "name", f"descriptor {fd}"))
    return OutputClosed(f"{name} was closed by its reader (broken pipe)")


def write_stdout(text: str) -> None:
    """Write `text` to stdout at once (flushed); a closed stdout raises `OutputClosed`."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise closed_output(sys.stdout) from None


class Reporter:
    """Override what you need; every method is optional."""

    keeps_results: bool = True
    name: str = "reporter"
    # the folder results' source_file is relative to, when the caller knows it (the CLI sets it)
    eval_root: str = ""

    def begin(self, run: EvalRun) -> None:
        """The run starts (its manifest: id, settings, agent versions, tests per agent)."""

    def start(self, agent: str, total: int) -> None:
        """An agent version will run `total` tests."""

    def result(self, result: TestResult) -> None:
        """One test finished."""

    def agent_done(self, agent: str) -> None:
        """An agent version finished (or will start no more tests)."""

    def finish(self, report: RunReport) -> None:
        """The whole run finished."""

    def abort(self) -> None:
        """The reporter failed (it raised): release what it holds; it gets no more calls."""


class CallbackReporter(Reporter):
    """Calls `fn(result)` for each result (the Dagster step's partition metadata, `run_tests`)."""

    keeps_results = False

    def __init__(self, fn: Callable[[TestResult], object]):
        self.fn = fn
        self.name = f"callback {getattr(fn, '__qualname__', fn)!s}"

    def result(self, result: TestResult) -> None:
        self.fn(result)
