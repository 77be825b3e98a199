"""The reporter contract: told when an agent's run starts, of each result, and of the end."""

from __future__ import annotations

from agent_health.model import RunReport, TestResult


class Reporter:
    """Override what you need; every method is optional."""

    def start(self, agent: str, total: int) -> None:
        """An agent version starts running `total` tests."""

    def result(self, result: TestResult) -> None:
        """One test finished."""

    def agent_done(self, agent: str) -> None:
        """An agent version finished."""

    def finish(self, report: RunReport) -> None:
        """The whole run finished."""
