"""Lazy, honest trace views bound to one run (the trace sources come from `agent_health.traces`)."""

from __future__ import annotations

from agent_health.sdk.errors import InfrastructureError


class TracesNotEnabled(InfrastructureError):
    """Traces were read for an agent that has no trace source."""


class TracesUnavailable(InfrastructureError):
    """Traces are enabled but did not arrive within the bounded wait."""


class TracesView:
    """Base class of trace views; `RunResult.traces` returns one when the agent has traces."""
