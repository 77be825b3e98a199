"""Derived metrics of one run: always computed, no assertion needed."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Mapping

from agent_health.model import RunResult
from agent_health.pricing import cost_of


def _args_key(args: Any) -> str:
    return json.dumps(args or {}, sort_keys=True, default=str).lower()


def run_metrics(run: RunResult | None, prices: Mapping[str, tuple[float, float]] | None = None) -> dict[str, Any]:
    """Tokens, cost, latency, LLM and tool calls, redundant calls, tool errors (and the ones the
    agent ignored), retries, step count and the slowest step."""
    if run is None:
        return {}
    calls = run.tool_calls()
    histogram = Counter(c.tool or "?" for c in calls)
    seen: Counter[tuple[str | None, str]] = Counter((c.tool, _args_key(c.args)) for c in calls)
    redundant = sum(n - 1 for n in seen.values() if n > 1)
    results = run.steps_of_type("tool_result")
    errors = [r for r in results if r.is_error]
    ignored = 0
    for err in errors:  # an error is ignored when the agent never retried that tool afterwards
        later = [s for s in run.trajectory[run.trajectory.index(err) + 1:] if s.kind == "tool_call"]
        if not any(c.tool == err.tool for c in later):
            ignored += 1
    timed = [s for s in run.trajectory if s.duration_ms is not None]
    slowest = max(timed, key=lambda s: s.duration_ms or 0.0, default=None)
    return {
        "input_tokens": run.usage.input_tokens,
        "output_tokens": run.usage.output_tokens,
        "total_tokens": run.usage.total_tokens,
        "cost_usd": cost_of(run.usage, prices),
        "latency_ms": round(run.duration_ms, 3),
        "llm_calls": run.usage.llm_calls,
        "tool_calls": len(calls),
        "tool_histogram": dict(histogram),
        "distinct_tools": len(histogram),
        "redundant_calls": redundant,
        "tool_errors": len(errors),
        "ignored_tool_errors": ignored,
        "retries": run.usage.retries,
        "steps": len(run.trajectory),
        "slowest_step": ({"kind": slowest.kind, "tool": slowest.tool, "duration_ms": slowest.duration_ms}
                         if slowest else None),
    }
