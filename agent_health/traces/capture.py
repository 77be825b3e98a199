"""OpenTelemetry spans captured for the runs themselves, with no backend (`traces.source: otel`).

Two ways in, both into the local span folder the trace source reads (so `result.traces`, the
derived metrics and the trace-query tools see them as they see any span there):

- **in-process agents** (python and framework connectors): while a run's agent is called, the
  run's W3C trace context is the current OpenTelemetry context, so the spans the agent starts
  belong to the run's trace; a span processor on the process's SDK `TracerProvider` keeps the
  spans of the traces of runs in flight (and only those) and writes each run's batch when it ends.
  When the process has no SDK provider yet, one is installed as the global provider.
- **out-of-process agents** (subprocess, http, agui): an OTLP/HTTP receiver on 127.0.0.1 for as
  long as the agent version's runtime is open. Each run gets its own endpoint,
  `http://127.0.0.1:PORT/runs/<run id>`, in `OTEL_EXPORTER_OTLP_ENDPOINT` (a subprocess agent's
  environment, and `env` of the request, so `{{env.OTEL_EXPORTER_OTLP_ENDPOINT}}` in an http
  body template): the standard exporter posts to `<endpoint>/v1/traces`, so the receiver knows
  the run of every span it gets, whatever trace the agent put it in, and stamps
  `agent_health.run.id` on it. Bodies are decoded with the OpenTelemetry project's own protobuf
  messages (`opentelemetry-proto`), binary or JSON, gzip or not.

This module imports the OpenTelemetry SDK and protos at its top; it is loaded only when the
configured source is `otel` (`pip install 'agent-health[otel]'`).
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agent_health.model.agent import AgentRequest
from agent_health.traces.local import LocalSpanStore
from agent_health.traces.otel import span_from_otel

log = logging.getLogger("agent_health.traces")

RUN_ID = "agent_health.run.id"
ENDPOINT_VARIABLE = "OTEL_EXPORTER_OTLP_ENDPOINT"
_MAX_BODY = 32 << 20  # bytes of one export request (the SDK's batches are far smaller)
_KEPT_TRACES = 10_000  # trace ids of finished runs whose late spans are still taken

_KINDS = {
    0: "SPAN_KIND_UNSPECIFIED",
    1: "SPAN_KIND_INTERNAL",
    2: "SPAN_KIND_SERVER",
    3: "SPAN_KIND_CLIENT",
    4: "SPAN_KIND_PRODUCER",
    5: "SPAN_KIND_CONSUMER",
}
_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


# -- OTLP spans as span dicts -----------------------------------------------------------------------
def any_value(value: common_pb2.AnyValue) -> Any:
    """An OTLP attribute value as plain Python."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which)


def spans_from_otlp(request: trace_service_pb2.ExportTraceServiceRequest) -> list[dict[str, Any]]:
    """The span dicts (`agent_health.traces.spans`) of one OTLP export request."""
    out: list[dict[str, Any]] = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: any_value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                start = span.start_time_unix_nano / 1e6 if span.start_time_unix_nano else None
                end = span.end_time_unix_nano / 1e6 if span.end_time_unix_nano else None
                out.append(
                    {
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex() or None,
                        "name": span.name,
                        "kind": _KINDS.get(span.kind, str(span.kind)),
                        "service": resource.get("service.name"),
                        "start_ms": start,
                        "end_ms": end,
                        "duration_ms": round(end - start, 3) if start is not None and end is not None else None,
                        "status": _STATUS.get(span.status.code, "UNSET"),
                        "attributes": {kv.key: any_value(kv.value) for kv in span.attributes},
                    }
                )
    return out


def decode_export(body: bytes, content_type: str, encoding: str) -> trace_service_pb2.ExportTraceServiceRequest:
    """An OTLP/HTTP traces body (protobuf or JSON, gzip or deflate) as its request message;
    ValueError naming what is wrong."""
    if encoding == "gzip":
        body = gzip.decompress(body)
    elif encoding == "deflate":
        body = zlib.decompress(body)
    elif encoding not in ("", "identity"):
        raise ValueError(f"unsupported content-encoding {encoding!r}")
    message = trace_service_pb2.ExportTraceServiceRequest()
    if content_type == "application/json":
        json_format.Parse(body, message)  # OTLP/JSON: hex ids, as the protobuf JSON mapping reads them
    else:
        message.ParseFromString(body)
    return message


# -- the runs in flight -----------------------------------------------------------------------------
class _Runs:
    """trace id -> run id of the runs whose in-process spans are kept, and their spans so far."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.traces: OrderedDict[str, tuple[str, LocalSpanStore]] = OrderedDict()
        self.pending: dict[str, list[dict[str, Any]]] = {}  # trace id -> spans not written yet
        self.open: set[str] = set()  # trace ids of runs in flight

    def begin(self, trace_id: str, run_id: str, store: LocalSpanStore) -> None:
        with self.lock:
            self.traces[trace_id] = (run_id, store)
            self.traces.move_to_end(trace_id)
            self.open.add(trace_id)
            while len(self.traces) > _KEPT_TRACES:
                old, _ = self.traces.popitem(last=False)
                self.pending.pop(old, None)

    def add(self, span: dict[str, Any]) -> None:
        trace_id = span["trace_id"]
        with self.lock:
            found = self.traces.get(trace_id)
            if found is None:
                return
            span["attributes"].setdefault(RUN_ID, found[0])
            if trace_id in self.open:
                self.pending.setdefault(trace_id, []).append(span)
                return
        found[1].write_spans([span])  # a late span of a finished run: written at once

    def end(self, trace_id: str) -> None:
        with self.lock:
            self.open.discard(trace_id)
            spans = self.pending.pop(trace_id, [])
            found = self.traces.get(trace_id)
        if spans and found is not None:
            found[1].write_spans(spans)


_RUNS = _Runs()


class RunSpanProcessor(SpanProcessor):
    """Keeps the ended spans of the runs in flight (by trace id); every other span is left alone."""

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.get_span_context()
        if ctx is None or format(ctx.trace_id, "032x") not in _RUNS.traces:
            return
        _RUNS.add(span_from_otel(span))

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_INSTALLED: list[RunSpanProcessor] = []
_INSTALL_LOCK = threading.Lock()


def install_processor() -> None:
    """Add the run span processor to the global SDK tracer provider, once per process (installing
    an SDK provider as the global one when there is none yet)."""
    with _INSTALL_LOCK:
        if _INSTALLED:
            return
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
            provider = trace.get_tracer_provider()  # another one may have won the race
        if not isinstance(provider, TracerProvider):
            log.warning(
                "traces: the global OpenTelemetry tracer provider is a %s, not the SDK's: in-process spans "
                "cannot be captured",
                type(provider).__name__,
            )
            return
        processor = RunSpanProcessor()
        provider.add_span_processor(processor)
        _INSTALLED.append(processor)


# -- the receiver -----------------------------------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Receiver

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length > _MAX_BODY:
            self._reply(413, b"export request too large")
            self.close_connection = True
            return
        body = self.rfile.read(length)
        parts = self.path.split("?", 1)[0].strip("/").split("/")
        # /runs/<run id>/v1/traces; logs and metrics are accepted and not kept
        if len(parts) != 4 or parts[0] != "runs" or parts[2] != "v1":
            self._reply(404, b"not an agent-health run endpoint")
            return
        run_id, signal = parts[1], parts[3]
        content_type = (self.headers.get("content-type") or "application/x-protobuf").split(";")[0].strip()
        if signal == "traces":
            try:
                message = decode_export(body, content_type, (self.headers.get("content-encoding") or "").lower())
            except (DecodeError, ValueError, OSError, json_format.ParseError) as exc:
                self._reply(400, f"malformed OTLP traces request: {exc}".encode())
                return
            spans = spans_from_otlp(message)
            for span in spans:
                span["attributes"].setdefault(RUN_ID, run_id)
            if spans:
                self.server.store.write_spans(spans)
        if content_type == "application/json":
            self._reply(200, b"{}", "application/json")
        else:
            self._reply(200, trace_service_pb2.ExportTraceServiceResponse().SerializeToString())

    def _reply(self, status: int, data: bytes, content_type: str = "application/x-protobuf") -> None:
        self.send_response(status)
        self.send_header("content-type", content_type if status == 200 else "text/plain")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, store: LocalSpanStore):
        super().__init__((host, 0), _Handler)
        self.store = store

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # an exporter that hung up mid-request: nothing to keep


class OTelCapture:
    """Captures the spans of one agent version's runs (see the module's docstring)."""

    def __init__(
        self, store: LocalSpanStore, *, receiver: bool = True, in_process: bool = True, host: str = "127.0.0.1"
    ):
        self.store = store
        self.receiver_wanted = receiver
        self.in_process = in_process
        self.host = host
        self._receiver: _Receiver | None = None
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str | None:
        """The receiver's URL, started on first use (None when the receiver is off)."""
        if not self.receiver_wanted:
            return None
        with self._lock:
            if self._receiver is None:
                self._receiver = _Receiver(self.host, self.store)
                threading.Thread(
                    target=self._receiver.serve_forever,
                    kwargs={"poll_interval": 0.1},
                    name="agent-health-otlp",
                    daemon=True,
                ).start()
            return f"http://{self.host}:{self._receiver.server_address[1]}"

    def prepare(self, request: AgentRequest) -> AgentRequest:
        """The request with the run's OTLP endpoint in its `env` (when the receiver is on)."""
        base = self.base_url
        if base is None or ENDPOINT_VARIABLE in request.env:
            return request
        return request.model_copy(update={"env": {**request.env, ENDPOINT_VARIABLE: f"{base}/runs/{request.run_id}"}})

    @contextlib.contextmanager
    def scope(self, request: AgentRequest) -> Iterator[None]:
        """While the agent runs: the run's trace context is the current one, and its in-process
        spans are kept; they are written when it ends."""
        if not self.in_process:
            yield
            return
        install_processor()
        _RUNS.begin(request.trace_id, request.run_id, self.store)
        token = otel_context.attach(TraceContextTextMapPropagator().extract({"traceparent": request.traceparent}))
        try:
            yield
        finally:
            otel_context.detach(token)
            _RUNS.end(request.trace_id)

    def close(self) -> None:
        with self._lock:
            receiver, self._receiver = self._receiver, None
        if receiver is not None:
            receiver.shutdown()
            receiver.server_close()
