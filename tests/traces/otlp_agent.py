"""A subprocess agent instrumented with the OpenTelemetry SDK, exporting its spans the standard way:
the OTLP/HTTP exporter, configured only by OTEL_EXPORTER_OTLP_ENDPOINT (the harness's receiver).
It knows nothing of agent-health: it neither continues TRACEPARENT nor tags its spans with the run."""

import json
import sys

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode

provider = TracerProvider(resource=Resource.create({"service.name": "rca-subprocess"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
tracer = provider.get_tracer("rca")

prompt = sys.stdin.read()
with tracer.start_as_current_span("invoke_agent rca", attributes={"gen_ai.operation.name": "invoke_agent"}):
    with tracer.start_as_current_span("chat gpt-4o-mini") as span:
        span.set_attributes(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 1000,
                "gen_ai.usage.output_tokens": 40,
            }
        )
    with tracer.start_as_current_span("execute_tool search_logs") as span:
        span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_logs"})
        span.set_status(Status(StatusCode.ERROR, "connection refused"))
        span.set_attribute("error.type", "ConnectionRefusedError")
    with tracer.start_as_current_span("chat gpt-4o-mini") as span:
        span.set_attributes(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 200,
                "gen_ai.usage.output_tokens": 40,
            }
        )
provider.shutdown()  # flushes the batch to the receiver before the process ends
print(json.dumps({"output": f"The payment service cannot reach its database ({len(prompt)} chars read)."}))
