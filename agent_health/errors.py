"""Errors a user can cause or meet, each with one clear message.

The bottom layer: every other module may import it; it imports nothing from agent_health.
"""

from __future__ import annotations


class AgentHealthError(Exception):
    """Base of every error agent-health raises on purpose."""


class ConfigError(AgentHealthError):
    """A bad configuration value; the message names the setting."""


class UsageError(AgentHealthError):
    """Bad command-line usage or API misuse outside a test."""


class EvalFileError(AgentHealthError):
    """An eval file that cannot be imported or parsed; names the file and line."""

    def __init__(self, file: str, message: str, line: int | None = None):
        self.file, self.line, self.message = file, line, message
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {message}")


class StoreError(AgentHealthError):
    """A result store, judge cache or recording store cannot read or write; the message names the
    store location and the key (never a credential)."""


class StoreRefusedRun(StoreError):
    """The store could not take a run's manifest at its start: the run stopped before any test."""


class InfrastructureError(AgentHealthError):
    """Something the test depends on broke (agent, judge, fixture, trace store): the test errors."""


class AgentError(InfrastructureError):
    """The agent could not produce a run; the message names the agent and the endpoint."""


class TracesNotEnabled(InfrastructureError):
    """Traces were read for an agent that has no trace source."""


class TracesUnavailable(InfrastructureError):
    """Traces are enabled but did not arrive within the bounded wait."""


class AgentRunTwiceError(InfrastructureError):
    """A test called agent.run() a second time."""


class FixtureError(InfrastructureError):
    """A fixture or hook raised, or a test asked for an unknown fixture."""


class BodyStop(AssertionError):
    """Stops the body after a gate signal already recorded the failure."""


class ExpectationFailed(BodyStop):
    """A non-soft expect() failed."""


class VerdictFailed(BodyStop):
    """verdict.or_throw() on a failed verdict."""


class ConversationError(InfrastructureError):
    """The user side of a conversation failed: a turn function gave no message, or the simulated
    user's model could not answer; the message names the test and the turn."""
