"""The trace-source contract: find one run's spans (and logs) by the documented correlation order.

Correlation, tried in order until spans are found:
1. `trace_id`: the W3C trace id the harness sent with the run;
2. `run_id`: a span attribute carrying the run id (`agent_health.run.id`, `gen_ai.conversation.id`);
3. `time_window`: the agent's service name plus the run's time window (the trace whose top-level
   span best matches the run's start and end, so overlapping runs do not mix).
The harness's own spans are always excluded.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_health.model import RunResult
from agent_health.traces.spans import roots

Correlation = Literal["trace_id", "run_id", "time_window"]


@dataclass(frozen=True)
class RunRef:
    """What a trace source needs to know about one run."""

    run_id: str
    trace_id: str | None = None
    agent: str = ""
    service: str | None = None
    started_at: float = 0.0  # unix seconds
    duration_ms: float = 0.0

    @classmethod
    def of(cls, run: RunResult, service: str | None = None) -> RunRef:
        return cls(run.run_id, run.trace_id, run.agent, service, run.started_at, run.duration_ms)

    def window_ms(self, slack_s: float) -> tuple[float, float]:
        start = self.started_at * 1000
        return start - slack_s * 1000, start + self.duration_ms + slack_s * 1000


@dataclass
class Fetched:
    """One run's spans and how they were found (`correlation` is None when nothing was)."""

    spans: list[dict[str, Any]] = field(default_factory=list)
    correlation: Correlation | None = None
    key: Any = None  # what matched: the trace id, the run id, or the chosen trace id in the window


def best_trace_in_window(spans: list[dict[str, Any]], run: RunRef) -> list[dict[str, Any]]:
    """Of the traces in a service's time window, the spans of the one whose top-level span starts
    and ends closest to the run (two overlapping runs each get their own trace)."""
    by_trace: dict[Any, list[dict[str, Any]]] = {}
    for s in spans:
        by_trace.setdefault(s.get("trace_id"), []).append(s)
    start = run.started_at * 1000
    end = start + run.duration_ms

    def distance(group: list[dict[str, Any]]) -> float:
        top = roots(group) or group
        s0: float = min(s.get("start_ms") or 0 for s in top)
        e0: float = max(s.get("end_ms") or 0 for s in top)
        return abs(s0 - start) + abs(e0 - end)

    if not by_trace:
        return []
    return min(by_trace.values(), key=distance)


class TraceSource(abc.ABC):
    """Reads spans and logs for runs. Implementations are thread-safe and read-only."""

    name: str = ""

    @abc.abstractmethod
    def fetch(self, run: RunRef) -> Fetched:
        """This run's spans by the correlation order; an empty Fetched when none are there (yet)."""

    def peek(self, run: RunRef) -> Fetched | None:
        """This run's spans when the source has them at hand (in memory, no I/O), else None. An
        event loop may call it; `fetch` (which may block) runs in a worker thread."""
        return None

    def fetch_many(self, runs: Iterable[RunRef]) -> dict[str, Fetched]:
        """Spans of many runs (sources override this to batch)."""
        return {r.run_id: self.fetch(r) for r in runs}

    @abc.abstractmethod
    def logs(self, run: RunRef, found: Fetched) -> list[dict[str, Any]]:
        """This run's log records, correlated the same way as its spans."""

    @abc.abstractmethod
    def search(self, run: RunRef, found: Fetched, dsl: dict[str, Any]) -> list[dict[str, Any]]:
        """A read-only search over this run's spans only (validated by `traces.dsl`)."""

    @abc.abstractmethod
    def describe(self) -> str:
        """Where spans are read from, without secrets (for error messages)."""

    def close(self) -> None:
        """Release connections."""
