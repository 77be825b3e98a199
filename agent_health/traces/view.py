"""Lazy, honest trace views bound to one run (the trace sources come from `agent_health.traces`).

The first access resolves the run's spans from its source, waiting (bounded) for them to land;
then it raises `TracesUnavailable` naming the run, never returning silent zeros.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agent_health.errors import InfrastructureError, TracesNotEnabled, TracesUnavailable
from agent_health.lazy import deferred

# span arithmetic and the query tools load when a body, judge or analyzer first asks
if TYPE_CHECKING:  # pragma: no cover
    import agent_health.traces.spans as spans
    import agent_health.traces.tools as tools
    from agent_health.traces.source import Fetched, RunRef, TraceSource
    from agent_health.traces.tools import RunTraceTools
else:
    spans = deferred("agent_health.traces.spans")
    tools = deferred("agent_health.traces.tools")


__all__ = ["TracesNotEnabled", "TracesUnavailable", "TracesView"]


class TracesView:
    """This run's traces: `spans`, `total_tokens`, `input_tokens`, `output_tokens`, `cost`,
    `llm_calls`, `tool_calls`, `span_duration(name)`, `metrics()`, `logs`, and `tools` (the
    run-scoped trace-query tools). Resolved on first access; `await view.aload()` resolves it
    without blocking an event loop."""

    def __init__(
        self,
        source: TraceSource,
        run: RunRef,
        *,
        wait_s: float = 10.0,
        poll_s: float = 0.25,
        prices: Mapping[str, tuple[float, float]] | None = None,
    ):
        self.source = source
        self.run = run
        self.wait_s = wait_s
        self.poll_s = poll_s
        self.prices = dict(prices or {})
        self._found: Fetched | None = None
        self._metrics: dict[str, Any] | None = None
        self._lock = threading.Lock()

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def load(self, wait_s: float | None = None) -> Fetched:
        """Resolve the spans now, waiting at most `wait_s` (default: the configured wait)."""
        with self._lock:
            if self._found is not None:
                return self._found
            budget = self.wait_s if wait_s is None else wait_s
            deadline = time.monotonic() + max(0.0, budget)
            delay, last_error = self.poll_s, None
            while True:
                try:
                    found = self.source.fetch(self.run)
                    last_error = None
                except InfrastructureError as exc:  # store down or not there yet: retry until the deadline
                    found, last_error = None, exc
                if found is not None and found.spans:
                    self._found = found
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0:  # the last look was at (or after) the deadline
                    break
                time.sleep(min(delay, remaining))
                delay = min(delay * 1.5, 2.0)
            tried = "trace id " + (self.run.trace_id or "(none)") + ", run id attribute"
            if self.run.service:
                tried += f", service {self.run.service} in the run's time window"
            why = f"; last error: {last_error}" if last_error else ""
            raise TracesUnavailable(
                f"traces unavailable for run {self.run.run_id} (agent {self.run.agent or '?'}): "
                f"no spans in {self.source.describe()} after waiting {budget:g}s "
                f"(tried {tried}){why}"
            )

    async def aload(self, wait_s: float | None = None) -> Fetched:
        """`load()` off the event loop (at once when the source has the spans at hand)."""
        if self._found is not None:
            return self._found
        try:
            found = self.source.peek(self.run)
        except Exception:  # the slow path below reports what is wrong  # noqa: BLE001
            found = None
        if found is not None and found.spans:
            self._found = found
            return found
        return await asyncio.to_thread(self.load, wait_s)

    @property
    def loaded(self) -> bool:
        return self._found is not None

    @property
    def correlation(self) -> str | None:
        """How the spans were found: trace_id, run_id or time_window."""
        return self.load().correlation

    @property
    def spans(self) -> list[dict[str, Any]]:
        """This run's spans (harness spans excluded), in start order."""
        return sorted(self.load().spans, key=lambda s: s.get("start_ms") or 0)

    def metrics(self) -> dict[str, Any]:
        """Token, cost, call, error and timing rollups of this run's spans."""
        if self._metrics is None:
            self._metrics = {**spans.span_metrics(self.load().spans, self.prices), "correlation": self.correlation}
        return self._metrics

    @property
    def input_tokens(self) -> int:
        return int(self.metrics()["input_tokens"])

    @property
    def output_tokens(self) -> int:
        return int(self.metrics()["output_tokens"])

    @property
    def total_tokens(self) -> int:
        """Tokens over the run's model calls, each counted once."""
        return int(self.metrics()["total_tokens"])

    @property
    def cost(self) -> float | None:
        """USD from the price table; None when a model has no price (never guessed)."""
        cost: float | None = self.metrics()["cost_usd"]
        return cost

    @property
    def llm_calls(self) -> int:
        return int(self.metrics()["llm_calls"])

    @property
    def tool_calls(self) -> int:
        return int(self.metrics()["tool_calls"])

    def span_duration(self, name: str) -> float:
        """Total duration (ms) of the spans named `name`; raises KeyError naming it when absent."""
        value = spans.span_duration(self.load().spans, name)
        if value is None:
            names = sorted({str(s.get("name")) for s in self.load().spans})
            raise KeyError(f"no span named {name!r} in run {self.run.run_id}; spans: {', '.join(names[:20])}")
        return value

    @property
    def logs(self) -> list[dict[str, Any]]:
        return self.source.logs(self.run, self.load())

    @property
    def tools(self) -> RunTraceTools:
        """Read-only trace-query tools scoped to this run (for judges and insights)."""
        return tools.SourceTraceTools(self)

    def __repr__(self) -> str:
        state = f"{len(self._found.spans)} spans via {self._found.correlation}" if self._found else "not loaded"
        return f"<TracesView run={self.run.run_id} {state}>"
