"""Agent runs recorded with the real OpenTelemetry Python SDK (in-memory exporter), the way an
instrumented agent and the harness would emit them, converted to span dicts."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agent_health.traces.otel import spans_from_otel

MS = 1_000_000  # nanoseconds per millisecond


@dataclass
class RecordedRun:
    run_id: str
    trace_id: str  # the trace the agent's spans are in
    sent_trace_id: str  # what the harness sent (differs when the agent ignored traceparent)
    service: str
    started_at: float  # unix seconds
    duration_ms: float
    spans: list[dict[str, Any]] = field(default_factory=list)
    expected: dict[str, int] = field(default_factory=dict)


class Recorder:
    """One exporter, one tracer provider per service (harness and agents)."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self._tracers: dict[str, Any] = {}

    def tracer(self, service: str) -> Any:
        if service not in self._tracers:
            provider = TracerProvider(resource=Resource.create({"service.name": service}))
            provider.add_span_processor(SimpleSpanProcessor(self.exporter))
            self._tracers[service] = provider.get_tracer("agent-health-tests")
        return self._tracers[service]

    def run(
        self,
        run_id: str,
        *,
        service: str = "rca-agent",
        start_s: float,
        calls: list[tuple[int, int]],
        tools: list[str],
        follow_traceparent: bool = True,
        run_attr: str | None = "agent_health.run.id",
        harness: bool = True,
        failing_tool: str | None = None,
        step_ms: int = 100,
    ) -> RecordedRun:
        """Record one run: the harness's test span (and a judge call), and the agent's run span with
        one chat span per (input, output) in `calls` and one tool span per name in `tools`."""
        self.exporter.clear()
        t0 = int(start_s * 1e9)
        sent_trace = os.urandom(16).hex()
        harness_tracer, agent_tracer = self.tracer("agent-health"), self.tracer(service)
        parent_ctx = None
        harness_span = None
        if harness:
            carrier = {"traceparent": f"00-{sent_trace}-{os.urandom(8).hex()}-01"}
            harness_span = harness_tracer.start_span(
                "agent_health.test", start_time=t0, context=TraceContextTextMapPropagator().extract(carrier)
            )
            parent_ctx = trace.set_span_in_context(harness_span)
        attrs = {run_attr: run_id} if run_attr else {}
        n_steps = len(calls) + len(tools)
        end = t0 + (n_steps + 1) * step_ms * MS
        root = agent_tracer.start_span(
            f"invoke_agent {service}",
            start_time=t0 + MS,
            context=parent_ctx if follow_traceparent else None,
            attributes={"gen_ai.operation.name": "invoke_agent", **attrs},
        )
        root_ctx = trace.set_span_in_context(root)
        clock = t0 + 2 * MS
        total_in = total_out = 0
        for i, (inp, out) in enumerate(calls):
            chat = agent_tracer.start_span(
                "chat gpt-4o-mini",
                start_time=clock,
                context=root_ctx,
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.response.model": "gpt-4o-mini",
                    "gen_ai.usage.input_tokens": inp,
                    "gen_ai.usage.output_tokens": out,
                    **attrs,
                },
            )
            clock += step_ms * MS
            chat.end(end_time=clock)
            total_in, total_out = total_in + inp, total_out + out
            if i < len(tools):
                tool = tools[i]
                span = agent_tracer.start_span(
                    f"execute_tool {tool}",
                    start_time=clock,
                    context=root_ctx,
                    attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, **attrs},
                )
                if tool == failing_tool:
                    span.set_status(Status(StatusCode.ERROR, "tool failed"))
                clock += step_ms * MS
                span.end(end_time=clock)
        # Frameworks often put the run's total on the run span too: it must not be counted twice.
        root.set_attribute("gen_ai.usage.input_tokens", total_in)
        root.set_attribute("gen_ai.usage.output_tokens", total_out)
        root.end(end_time=end - MS)
        if harness_span is not None:
            judge = harness_tracer.start_span(
                "chat judge",
                start_time=end - MS,
                context=parent_ctx,
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-4o",
                    "gen_ai.usage.input_tokens": 5000,
                    "gen_ai.usage.output_tokens": 500,
                    "agent_health.harness": True,
                    "agent_health.run.id": run_id,
                },
            )
            judge.end(end_time=end)
            harness_span.end(end_time=end)
        spans = spans_from_otel(self.exporter.get_finished_spans())
        agent_trace = next(s["trace_id"] for s in spans if s["service"] == service)
        return RecordedRun(
            run_id=run_id,
            trace_id=agent_trace,
            sent_trace_id=sent_trace,
            service=service,
            started_at=start_s,
            duration_ms=(end - t0) / MS,
            spans=spans,
            expected={
                "input_tokens": total_in,
                "output_tokens": total_out,
                "llm_calls": len(calls),
                "tool_calls": len(tools),
                "agent_spans": 1 + len(calls) + len(tools),
            },
        )
