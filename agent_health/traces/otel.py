"""OpenTelemetry SDK spans (`ReadableSpan`, e.g. from an in-memory or custom exporter) as span
dicts. Duck-typed, so this module does not import the OpenTelemetry SDK."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

_KINDS = {
    0: "SPAN_KIND_INTERNAL",
    1: "SPAN_KIND_SERVER",
    2: "SPAN_KIND_CLIENT",
    3: "SPAN_KIND_PRODUCER",
    4: "SPAN_KIND_CONSUMER",
}
_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


def _value(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def span_from_otel(span: Any) -> dict[str, Any]:
    """One SDK span as a span dict (see `agent_health.traces.spans`)."""
    ctx = span.get_span_context() if hasattr(span, "get_span_context") else span.context
    parent = getattr(span, "parent", None)
    start_ms = span.start_time / 1e6 if span.start_time else None
    end_ms = span.end_time / 1e6 if span.end_time else None
    resource = dict(getattr(getattr(span, "resource", None), "attributes", {}) or {})
    kind = getattr(span.kind, "value", span.kind)
    code = getattr(getattr(span.status, "status_code", None), "value", 0)
    return {
        "trace_id": format(ctx.trace_id, "032x"),
        "span_id": format(ctx.span_id, "016x"),
        "parent_span_id": format(parent.span_id, "016x") if parent is not None else None,
        "name": span.name,
        "kind": _KINDS.get(kind, str(kind)),
        "service": resource.get("service.name"),
        "start_ms": start_ms,
        "end_ms": end_ms,
        "duration_ms": round(end_ms - start_ms, 3) if start_ms is not None and end_ms is not None else None,
        "status": _STATUS.get(code, "UNSET"),
        "attributes": {k: _value(v) for k, v in (span.attributes or {}).items()},
    }


def spans_from_otel(spans: Iterable[Any]) -> list[dict[str, Any]]:
    return [span_from_otel(s) for s in spans]
