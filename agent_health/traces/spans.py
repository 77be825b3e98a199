"""The one span shape every trace source returns, and what can be derived from a run's spans.

A span is a plain dict (cheap to build for thousands of runs, JSON as is):

    {"trace_id", "span_id", "parent_span_id", "name", "kind", "service", "start_ms", "end_ms",
     "duration_ms", "status" ("UNSET" | "OK" | "ERROR"), "attributes": {dotted.key: value}}

Attribute names follow the OpenTelemetry GenAI conventions (`gen_ai.usage.input_tokens`, ...).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from agent_health.model import Usage
from agent_health.pricing import call_cost

RUN_ID_ATTRIBUTES: tuple[str, ...] = ("agent_health.run.id", "gen_ai.conversation.id")
"""Span attributes that carry a run id, in the order they are tried."""

HARNESS_ATTRIBUTE = "agent_health.harness"
"""Set to true on spans the harness itself emits (engine, judges): never counted as the agent's."""

HARNESS_SERVICES: tuple[str, ...] = ("agent-health",)
"""Service names of the harness's own spans."""

INPUT_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.usage.prompt_tokens")
OUTPUT_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.usage.completion_tokens")
LLM_OPERATIONS = {"chat", "text_completion", "generate_content", "completion", "embeddings"}


def attr(span: Mapping[str, Any], *names: str) -> Any:
    """The first of `names` present in the span's attributes, or None."""
    attrs = span.get("attributes") or {}
    for n in names:
        if n in attrs and attrs[n] is not None:
            return attrs[n]
    return None


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def is_harness(span: Mapping[str, Any], services: Iterable[str] = HARNESS_SERVICES) -> bool:
    """True for spans the harness emitted (its service, or the harness attribute)."""
    flag = attr(span, HARNESS_ATTRIBUTE)
    return span.get("service") in set(services) or flag is True or str(flag).lower() == "true"


def usage_of(span: Mapping[str, Any]) -> tuple[int, int]:
    """(input, output) tokens this span reports about itself or its subtree."""
    return _int(attr(span, *INPUT_TOKENS)), _int(attr(span, *OUTPUT_TOKENS))


def is_tool_span(span: Mapping[str, Any]) -> bool:
    return attr(span, "gen_ai.operation.name") == "execute_tool" or attr(span, "gen_ai.tool.name") is not None


def usage_spans(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spans whose usage counts: those carrying usage with no descendant that carries usage too.

    A parent that reports the sum of its children (an agent-run span, a framework wrapper) would
    otherwise be counted twice.
    """
    by_id = {s.get("span_id"): s for s in spans}
    with_usage = [s for s in spans if any(usage_of(s))]
    covered: set[Any] = set()  # span ids that have a usage-carrying descendant
    for s in with_usage:
        parent, hops = s.get("parent_span_id"), 0
        while parent and parent in by_id and hops < 256:
            covered.add(parent)
            parent, hops = by_id[parent].get("parent_span_id"), hops + 1
    return [s for s in with_usage if s.get("span_id") not in covered]


def is_llm_span(span: Mapping[str, Any], counted: set[Any]) -> bool:
    op = attr(span, "gen_ai.operation.name")
    if op in LLM_OPERATIONS:
        return True
    return op is None and span.get("span_id") in counted and not is_tool_span(span)


def span_metrics(
    spans: list[dict[str, Any]], prices: Mapping[str, tuple[float, float]] | None = None
) -> dict[str, Any]:
    """Tokens, cost, LLM and tool calls, errors and timings of one run's (harness-free) spans.

    Cost is priced per model call; it is None (never guessed) when a call's model has no price.
    """
    for s in spans:
        if not isinstance(s, dict) or not isinstance(s.get("attributes") or {}, dict):
            # Malformed stored data, not a caller's wrong type.
            raise ValueError(f"malformed span {str(s)[:120]}: a span is a mapping with an 'attributes' mapping")  # noqa: TRY004
    counted_spans = usage_spans(spans)
    counted = {s.get("span_id") for s in counted_spans}
    input_tokens = output_tokens = 0
    cost: float | None = 0.0
    unpriced: set[str] = set()
    by_model: dict[str, dict[str, int]] = {}
    for s in counted_spans:
        i, o = usage_of(s)
        input_tokens, output_tokens = input_tokens + i, output_tokens + o
        model = attr(s, "gen_ai.response.model", "gen_ai.request.model")
        m = by_model.setdefault(str(model or "?"), {"input_tokens": 0, "output_tokens": 0, "calls": 0})
        m["input_tokens"] += i
        m["output_tokens"] += o
        m["calls"] += 1
        call = call_cost(str(model) if model else None, i, o, prices)
        if call is None:
            unpriced.add(str(model or "?"))
        elif cost is not None:
            cost += call
    tools, llm = [], []
    for s in spans:  # one pass: a span is a tool call, a model call, or neither
        if is_tool_span(s):
            tools.append(s)
        elif is_llm_span(s, counted):
            llm.append(s)
    histogram = Counter(str(attr(s, "gen_ai.tool.name") or s.get("name")) for s in tools)
    tool_errors = [s for s in tools if s.get("status") == "ERROR" or attr(s, "error.type") is not None]
    starts = [s["start_ms"] for s in spans if s.get("start_ms") is not None]
    ends = [s["end_ms"] for s in spans if s.get("end_ms") is not None]
    root_ids = {s.get("span_id") for s in roots(spans)}
    slowest = max(
        (s for s in spans if s.get("duration_ms") is not None and s.get("span_id") not in root_ids),
        key=lambda s: s["duration_ms"],
        default=None,
    )
    return {
        "spans": len(spans),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
        "cost_usd": None if unpriced and (input_tokens + output_tokens) else round(cost or 0.0, 8),
        "unpriced_models": sorted(unpriced),
        "by_model": by_model,
        "llm_calls": len(llm),
        "tool_calls": len(tools),
        "tool_histogram": dict(histogram),
        "tool_errors": len(tool_errors),
        "error_spans": sum(1 for s in spans if s.get("status") == "ERROR"),
        "duration_ms": round(max(ends) - min(starts), 3) if starts and ends else None,
        "slowest_span": ({"name": slowest.get("name"), "duration_ms": slowest["duration_ms"]} if slowest else None),
    }


def roots(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spans whose parent is not among `spans` (the run's top-level spans)."""
    ids = {s.get("span_id") for s in spans}
    return [s for s in spans if not s.get("parent_span_id") or s.get("parent_span_id") not in ids]


def span_duration(spans: list[dict[str, Any]], name: str) -> float | None:
    """Total duration (ms) of the spans called `name`, None when there is none."""
    found = [s.get("duration_ms") or 0.0 for s in spans if s.get("name") == name]
    return round(sum(found), 3) if found else None


def usage_from_spans(spans: list[dict[str, Any]]) -> Usage:
    """The run's token usage as a `Usage`, counted once per model call."""
    m = span_metrics(spans)
    model = next(iter(m["by_model"]), None)
    return Usage.of(
        m["input_tokens"], m["output_tokens"], model=None if model == "?" else model, llm_calls=m["llm_calls"]
    )
