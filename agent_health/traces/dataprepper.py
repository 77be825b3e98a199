"""The Data Prepper document layout (`otel-v1-apm-span-*`, `logs-otel-v1-*`) in both forms:

- flat: attributes as top-level keys with `@` for dots, `span.attributes.gen_ai@usage@input_tokens`,
  `resource.attributes.service@name` (what Data Prepper's OTel trace pipeline writes);
- nested: an `attributes` object (dotted keys or nested objects) and `resource.attributes`.

`from_span_document` reads either into the span shape of `agent_health.traces.spans`;
`to_span_document` writes one (used to export spans and by the tests).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

Form = Literal["flat", "nested"]
STATUS = {
    0: "UNSET",
    1: "OK",
    2: "ERROR",
    "STATUS_CODE_UNSET": "UNSET",
    "STATUS_CODE_OK": "OK",
    "STATUS_CODE_ERROR": "ERROR",
    "UNSET": "UNSET",
    "OK": "OK",
    "ERROR": "ERROR",
}
_CODE = {"UNSET": 0, "OK": 1, "ERROR": 2}


def iso(ms: float | None) -> str | None:
    """Epoch milliseconds as the ISO-8601 UTC string Data Prepper stores."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def epoch_ms(value: Any) -> float | None:
    """ISO string, epoch seconds/milliseconds/nanoseconds -> epoch milliseconds."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        v = float(value)
        return v / 1e6 if v > 1e17 else (v if v > 1e11 else v * 1000)
    text = str(value).replace("Z", "+00:00")
    if "." in text:  # Python < 3.12 accepts at most 6 fractional digits
        head, _, rest = text.partition(".")
        digits = "".join(c for c in rest if c.isdigit())
        text = f"{head}.{digits[:6]}{rest[len(digits) :]}"
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp() * 1000


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: value}


def _attributes(doc: Mapping[str, Any], scope: str) -> dict[str, Any]:
    """Attributes of `scope` ('span', 'log' or 'resource') from either form, dotted keys."""
    out: dict[str, Any] = {}
    flat_prefix = f"{scope}.attributes."
    for key, value in doc.items():
        if key.startswith(flat_prefix):
            out[key[len(flat_prefix) :].replace("@", ".")] = value
    nested: Any = doc.get("attributes") if scope != "resource" else None
    if scope == "resource":
        res = doc.get("resource")
        nested = res.get("attributes") if isinstance(res, Mapping) else doc.get("resource.attributes")
    elif isinstance(doc.get(scope), Mapping):  # {"span": {"attributes": {...}}}
        nested = doc[scope].get("attributes", nested)
    if isinstance(nested, Mapping):
        out.update(_flatten(nested))
    return out


def from_span_document(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A Data Prepper span document (flat or nested form) as a span dict."""
    attrs = _attributes(doc, "span")
    resource = _attributes(doc, "resource")
    status = doc.get("status")
    code = status.get("code") if isinstance(status, Mapping) else doc.get("status.code", status)
    start, end = epoch_ms(doc.get("startTime")), epoch_ms(doc.get("endTime"))
    nanos = doc.get("durationInNanos")
    duration = nanos / 1e6 if isinstance(nanos, (int, float)) else (end - start if start and end else None)
    return {
        "trace_id": doc.get("traceId") or doc.get("trace_id"),
        "span_id": doc.get("spanId") or doc.get("span_id"),
        "parent_span_id": doc.get("parentSpanId") or doc.get("parent_span_id") or None,
        "name": doc.get("name"),
        "kind": doc.get("kind"),
        "service": doc.get("serviceName") or resource.get("service.name"),
        "start_ms": start,
        "end_ms": end,
        "duration_ms": round(duration, 3) if duration is not None else None,
        "status": STATUS.get(code, "UNSET") if code is not None else "UNSET",
        "attributes": attrs,
    }


def to_span_document(span: Mapping[str, Any], form: Form = "flat") -> dict[str, Any]:
    """A span dict as a Data Prepper span document in the given form."""
    attrs = dict(span.get("attributes") or {})
    doc: dict[str, Any] = {
        "traceId": span["trace_id"],
        "spanId": span["span_id"],
        "parentSpanId": span.get("parent_span_id") or "",
        "name": span.get("name"),
        "kind": span.get("kind") or "SPAN_KIND_INTERNAL",
        "startTime": iso(span.get("start_ms")),
        "endTime": iso(span.get("end_ms")),
        "durationInNanos": int((span.get("duration_ms") or 0) * 1e6),
        "serviceName": span.get("service"),
        "traceGroup": None,
        "status.code": _CODE.get(span.get("status") or "UNSET", 0),
    }
    if form == "flat":
        doc.update({f"span.attributes.{k.replace('.', '@')}": v for k, v in attrs.items()})
        doc["resource.attributes.service@name"] = span.get("service")
    else:
        doc["attributes"] = attrs
        doc["resource"] = {"attributes": {"service.name": span.get("service")}}
    return doc


def from_log_document(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A Data Prepper log document (either form) as a log record dict."""
    resource = _attributes(doc, "resource")
    return {
        "time_ms": epoch_ms(doc.get("time") or doc.get("observedTime") or doc.get("@timestamp")),
        "severity": doc.get("severityText") or doc.get("severity.text"),
        "body": doc.get("body"),
        "trace_id": doc.get("traceId") or doc.get("trace_id"),
        "span_id": doc.get("spanId") or doc.get("span_id"),
        "service": doc.get("serviceName") or resource.get("service.name"),
        "attributes": _attributes(doc, "log"),
    }


def to_log_document(log: Mapping[str, Any], form: Form = "flat") -> dict[str, Any]:
    """A log record dict as a Data Prepper log document."""
    doc: dict[str, Any] = {
        "traceId": log.get("trace_id"),
        "spanId": log.get("span_id"),
        "time": iso(log.get("time_ms")),
        "severityText": log.get("severity"),
        "body": log.get("body"),
        "serviceName": log.get("service"),
    }
    attrs = dict(log.get("attributes") or {})
    if form == "flat":
        doc.update({f"log.attributes.{k.replace('.', '@')}": v for k, v in attrs.items()})
    else:
        doc["attributes"] = attrs
    return doc
