"""The reporter contract. The run function calls every method from one thread, in this order:
`begin(run)` once before any test runs (open files here), `start(agent, total)` for every agent
version, `result(r)` for each result the moment it finishes (results of several agent versions
interleave: they share one concurrency limit), `agent_done(agent)` when an agent version's last
test finished, and `finish(report)` once at the end.

A reporter that needs every result at the end leaves `keeps_results` True: `finish(report)` then
gets them in `report.results`, which keeps them all in memory. A streaming reporter sets it to
False; its `finish(report)` gets the summaries only, and memory stays flat in the number of tests.
A reporter that cannot write raises `ReportError` naming itself and its file: the run goes on,
results still go to the store, and the CLI exits 2 at the end.
"""

from __future__ import annotations

from collections.abc import Callable

from agent_health.errors import AgentHealthError
from agent_health.model import EvalRun, RunReport, TestResult


class ReportError(AgentHealthError):
    """A report cannot be written; the message names the reporter and the file."""


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
