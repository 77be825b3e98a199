"""The trace-query tool pack: read-only tools bound to ONE run, for judges and insights.

Trace sources (local span files, OpenSearch) implement `RunTraceTools`; the agentic judge exposes
these methods to the model as tools, and custom evaluators receive them as `tools`.
"""

from __future__ import annotations

import abc
import asyncio
from typing import TYPE_CHECKING, Any

from agent_health.traces.dsl import validate

if TYPE_CHECKING:
    from agent_health.traces.view import TracesView


class RunTraceTools(abc.ABC):
    """Read-only trace access scoped to one run; nothing here can see another run's data."""

    run_id: str

    @abc.abstractmethod
    async def get_spans(self) -> list[dict[str, Any]]:
        """This run's spans (OpenTelemetry fields: name, span_id, parent_span_id, start/end, attributes)."""

    @abc.abstractmethod
    async def get_logs(self) -> list[dict[str, Any]]:
        """This run's log records."""

    @abc.abstractmethod
    async def metrics(self) -> dict[str, Any]:
        """Token, cost, duration and call rollups of this run's spans."""

    @abc.abstractmethod
    async def query(self, dsl: dict[str, Any]) -> list[dict[str, Any]]:
        """A read-only search, always filtered to this run. Rejects scripts and writes."""


class SourceTraceTools(RunTraceTools):
    """`RunTraceTools` over any trace source, through a run's `TracesView` (so every tool sees
    exactly the spans the view resolved, and `query` is filtered to them by the source)."""

    def __init__(self, view: TracesView):
        self.view = view
        self.run_id = view.run_id

    async def get_spans(self) -> list[dict[str, Any]]:
        await self.view.aload()
        return self.view.spans

    async def get_logs(self) -> list[dict[str, Any]]:
        found = await self.view.aload()
        return await asyncio.to_thread(self.view.source.logs, self.view.run, found)

    async def metrics(self) -> dict[str, Any]:
        await self.view.aload()
        return self.view.metrics()

    async def query(self, dsl: dict[str, Any]) -> list[dict[str, Any]]:
        validate(dsl)  # reject before touching the store
        found = await self.view.aload()
        return await asyncio.to_thread(self.view.source.search, self.view.run, found, dsl)
