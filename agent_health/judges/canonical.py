"""Canonical, run-independent views of what a judge sees: the run's content without its ids and
clock readings, and trace records without span/trace ids and timestamps.

Both the judge prompt and the cache key are built from these views, so a deterministic agent that
reproduces a trajectory reproduces the key, and anything the judge actually sees changes it.
"""

from __future__ import annotations

from typing import Any

from agent_health.model import RunResult
from agent_health.model.judge import JudgeRequest

# Per-run identifiers and absolute clock readings: different on every run, never evidence.
_VOLATILE = frozenset(
    {
        "span_id",
        "spanid",
        "trace_id",
        "traceid",
        "parent_span_id",
        "parentspanid",
        "parent_id",
        "run_id",
        "runid",
        "start_time",
        "end_time",
        "start_ms",
        "end_ms",
        "time_ms",
        "starttime",
        "endtime",
        "timestamp",
        "@timestamp",
        "time",
        "time_unix_nano",
        "start_time_unix_nano",
        "end_time_unix_nano",
        "observed_time_unix_nano",
        "observedtimestamp",
        "_id",
        "id",
    }
)


def _volatile(key: str) -> bool:
    low = key.lower()
    # dotted attribute names of per-run ids: OpenTelemetry's `gen_ai.conversation.id`, the local
    # span store's `agent_health.run.id`
    return low in _VOLATILE or low.endswith(
        (".run_id", ".trace_id", ".span_id", "_run_id", ".run.id", ".conversation.id", ".trace.id", ".span.id")
    )


def scrub(value: Any) -> Any:
    """Drop volatile keys at any depth."""
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0])) if not _volatile(str(k))}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    return value


def canonical_run(request: JudgeRequest) -> dict[str, Any]:
    """The judged content: task, context, output and trajectory (no run id, timings or call ids)."""
    run: RunResult | None = request.run
    if run is None:
        return {"output": request.output}
    content: dict[str, Any] = {
        "prompt": run.prompt,
        "context": [dict(c) for c in run.context],
        "output": run.output,
        "trajectory": [
            {
                "kind": s.kind,
                "content": s.content,
                "tool": s.tool,
                "args": s.args or None,
                "is_error": s.is_error,
                # a conversation's later user messages say who spoke (runs of one turn keep their keys)
                **({"role": "user"} if s.role == "user" else {}),
            }
            for s in run.agent_steps  # the prompt is above; its echo as first event would only repeat it
        ],
    }
    conv = run.conversation
    if conv is not None:
        content["conversation"] = {
            "turns": len(run.turns),
            "mode": conv.mode,
            "ended": conv.ended,
            **({"goal": conv.goal, "goal_reached": conv.goal_reached} if conv.mode == "simulated" else {}),
        }
    return content


class TracesMissing(Exception):
    """The judge was asked for trace data but the run has no trace tools."""


async def gather_traces(request: JudgeRequest) -> dict[str, Any]:
    """Spans and/or logs the judge's context asks for (and, for agentic judges, what the tools can
    reach, so the cache key covers it). Empty when traces are not involved."""
    want_spans = "traces" in request.context or "trace_query" in request.tools
    want_logs = "logs" in request.context or "trace_query" in request.tools
    if not (want_spans or want_logs):
        return {}
    tools = request.trace_tools
    if tools is None:
        asked = [c for c in ("traces", "logs") if c in request.context] + (
            ["tools=['trace_query']"] if "trace_query" in request.tools else []
        )
        agent = request.run.agent if request.run is not None else "?"
        raise TracesMissing(
            f"judge asks for {', '.join(asked)} but run of agent {agent or '?'} has no trace source; "
            "configure traces for this agent or drop them from the judge's context/tools"
        )
    out: dict[str, Any] = {}
    if want_spans:
        out["spans"] = scrub(await tools.get_spans())
    if want_logs:
        out["logs"] = scrub(await tools.get_logs())
    return out
