"""Derived metrics of one run: always computed, no assertion needed.

`run_metrics` reads the RunResult; `trace_metrics` adds what the run's spans say when traces are
available; `with_trace_metrics` (an engine analyzer) stores both in the TestResult's `metrics`.
`shown_signals` is how reports show them: each headline number as a `metric` signal with role
`observe` beside the test's own signals, derived from `metrics` when shown, not stored twice.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from agent_health.errors import AgentHealthError
from agent_health.lazy import deferred
from agent_health.model import RunResult, Signal, Step, TestResult
from agent_health.model.copies import replaced
from agent_health.pricing import cost_of

# span arithmetic loads for a test that has traces
if TYPE_CHECKING:
    import agent_health.traces.spans as spans
else:
    spans = deferred("agent_health.traces.spans")


_WS = re.compile(r"[\s_\-.,:;'\"]+")


def _near(value: Any) -> Any:
    """Arguments normalized so near-same calls compare equal: case, spacing and punctuation in
    strings, float noise, and list order do not matter."""
    if isinstance(value, dict):
        return {str(k).lower(): _near(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return sorted((_near(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True, default=str))
    if isinstance(value, float):
        return float(f"{value:.3g}")
    if isinstance(value, str):
        return _WS.sub(" ", value.lower()).strip()
    return value


def _args_key(args: Any) -> str:
    return json.dumps(_near(args or {}), sort_keys=True, default=str)


def run_metrics(
    run: RunResult | None, prices: Mapping[str, tuple[float, float]] | None = None, *, untraced: bool = False
) -> dict[str, Any]:
    """Tokens, cost, latency, LLM and tool calls, redundant calls, tool errors (and the ones the
    agent ignored), retries, step count and the slowest step; with `untraced` (the run has no
    traces), the trace metrics' status too (`not_enabled`, last, as `with_trace_metrics` adds it:
    that analyzer then has nothing to add and makes no copy of the result)."""
    if run is None:
        return {}
    # One pass over the trajectory where the figures allow it (this runs for every test): the
    # same numbers, ties broken the same way (the first slowest and heaviest step).
    trajectory = run.trajectory
    calls = [s for s in trajectory if s.kind == "tool_call"]
    histogram: dict[str, int] = {}
    for c in calls:
        histogram[c.tool or "?"] = histogram.get(c.tool or "?", 0) + 1
    redundant = 0
    if len(calls) > 1:  # a repeat needs two calls: their arguments are normalized only then
        seen: Counter[tuple[str | None, str]] = Counter((c.tool, _args_key(c.args)) for c in calls)
        redundant = sum(n - 1 for n in seen.values() if n > 1)
    errors: list[Step] = []
    tool_ms: dict[str, float] = {}
    slowest: Step | None = None
    heaviest: tuple[Step | None, int] = (None, 0)
    for s in trajectory:
        if s.kind == "tool_result":
            if s.is_error:
                errors.append(s)
            tool_ms[s.tool or "?"] = tool_ms.get(s.tool or "?", 0.0) + (s.duration_ms or 0.0)
        if s.duration_ms is not None and (slowest is None or (s.duration_ms or 0.0) > (slowest.duration_ms or 0.0)):
            slowest = s
        tokens = (s.input_tokens or 0) + (s.output_tokens or 0)
        if heaviest[0] is None or tokens > heaviest[1]:
            heaviest = (s, tokens)
    ignored = 0
    retries = 0  # the agent called a tool again right after that tool failed
    if errors:
        for err in errors:  # an error is ignored when the agent never retried that tool afterwards
            later = [s for s in trajectory[trajectory.index(err) + 1 :] if s.kind == "tool_call"]
            if not any(c.tool == err.tool for c in later):
                ignored += 1
        for i, step in enumerate(trajectory):
            if step.kind == "tool_result" and step.is_error:
                nxt = next((s for s in trajectory[i + 1 :] if s.kind == "tool_call"), None)
                retries += int(nxt is not None and nxt.tool == step.tool)
    agent_steps = run.agent_steps
    usage = run.usage  # read once: a model's attribute read costs a hook call (BaseModel.__getattr__)
    metrics: dict[str, Any] = {
        **conversation_metrics(run),
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "cost_usd": cost_of(usage, prices),
        "latency_ms": round(run.duration_ms, 3),
        "llm_calls": usage.llm_calls,
        "tool_calls": len(calls),
        "tool_histogram": dict(histogram),
        "distinct_tools": len(histogram),
        "redundant_calls": redundant,
        "tool_errors": len(errors),
        "ignored_tool_errors": ignored,
        "retries": usage.retries,
        "tool_retries": retries,
        # the prompt echoed as first event (and in a conversation each turn's user message) is no step the agent took
        "steps": len(agent_steps) - _later_user_turns(run),
        "step_latency_ms": [s.duration_ms for s in agent_steps],  # per step, in trajectory order
        "tool_latency_ms": {k: round(v, 3) for k, v in tool_ms.items()},
        "slowest_step": (
            {"kind": slowest.kind, "tool": slowest.tool, "duration_ms": slowest.duration_ms} if slowest else None
        ),
        "heaviest_step": (
            {"kind": heaviest[0].kind, "tool": heaviest[0].tool, "tokens": heaviest[1]}
            if heaviest[0] is not None and heaviest[1]
            else None
        ),
    }
    if untraced:
        metrics["traces"] = _NOT_ENABLED.copy()
    return metrics


def _later_user_turns(run: RunResult) -> int:
    """The turns after the first of a conversation that open with the user's message."""
    turns = run.turns
    if len(turns) < 2:  # a run of one prompt (most): no later turn
        return 0
    trajectory = run.trajectory
    return sum(1 for t in turns[1:] if trajectory[t.start].role == "user")


def conversation_metrics(run: RunResult) -> dict[str, Any]:
    """A conversation's numbers: its turns, each turn's latency, how it ended, and for a simulated
    user whether and when it reached its goal and what its model calls spent. Empty for one turn."""
    conv = run.conversation
    if not run.turns or conv is None:
        return {}
    out: dict[str, Any] = {
        "turns": len(run.turns),
        "turn_latency_ms": [round(t.duration_ms, 3) for t in run.turns],
        "conversation_end": conv.ended,
    }
    if conv.mode == "simulated":
        out["goal_reached"] = bool(conv.goal_reached)
        out["turns_to_goal"] = conv.turns_to_goal
        out["user_tokens"] = conv.user_usage.total_tokens
    return out


_NOT_ENABLED: dict[str, Any] = {"status": "not_enabled"}  # the traces metrics of a run whose agent has none


def trace_metrics(
    view: Any, prices: Mapping[str, tuple[float, float]] | None = None, wait_s: float = 0.0
) -> dict[str, Any]:
    """Metrics from the run's spans: `{"status": "ok", ...span metrics}`, or a status saying why
    there are none (`not_enabled`, or `unavailable` with the error). Never silent zeros.
    `view` is the run's `TracesView`, None when its agent has no traces."""
    if view is None:
        return {"status": "not_enabled"}
    try:
        found = view.load(wait_s=wait_s)
    except Exception as exc:  # whatever the trace source raised is the status's reason  # noqa: BLE001
        return _unavailable(view, exc)
    return _span_metrics(view, found, prices)


async def atrace_metrics(
    view: Any, prices: Mapping[str, tuple[float, float]] | None = None, wait_s: float = 0.0
) -> dict[str, Any]:
    """`trace_metrics` for an event loop: the spans are fetched (and waited for) in a worker
    thread; only the arithmetic runs on the loop."""
    if view is None:
        return {"status": "not_enabled"}
    try:
        found = await view.aload(wait_s=wait_s)
    except Exception as exc:  # whatever the trace source raised is the status's reason  # noqa: BLE001
        return _unavailable(view, exc)
    return _span_metrics(view, found, prices)


def _span_metrics(view: Any, found: Any, prices: Mapping[str, tuple[float, float]] | None) -> dict[str, Any]:
    try:
        metrics = spans.span_metrics(found.spans, {**view.prices, **(prices or {})})
    except Exception as exc:  # spans are untrusted data from any source  # noqa: BLE001
        return _unavailable(view, exc)
    return {"status": "ok", "correlation": found.correlation, **metrics}


def _unavailable(view: Any, exc: Exception) -> dict[str, Any]:
    if isinstance(exc, AgentHealthError):  # store down, bad trace settings: recorded, the test stands
        return {"status": "unavailable", "error": str(exc)}
    # malformed spans from the agent must not crash the whole run
    return {"status": "unavailable", "error": f"could not read spans of run {view.run_id}: {type(exc).__name__}: {exc}"}


# Headline numbers recorded as metric signals on every test, and problem counters recorded only
# when non-zero (every number stays in `TestResult.metrics`; signals are kept few because a suite
# holds thousands of them).
SIGNAL_METRICS = ("total_tokens", "cost_usd", "latency_ms", "llm_calls", "tool_calls")
CONVERSATION_SIGNAL_METRICS = ("turns", "goal_reached", "turns_to_goal")  # a conversation's, when it has them
PROBLEM_METRICS = ("redundant_calls", "tool_errors", "ignored_tool_errors", "tool_retries", "retries")
TRACE_SIGNAL_METRICS = ("total_tokens", "cost_usd", "llm_calls", "tool_calls", "tool_errors", "duration_ms")
# Derived metrics each result shows at a glance beside its status (its Dagster partition's metadata);
# tokens and cost are there already, from the result's usage.
GLANCE_METRICS = ("tool_calls", "llm_calls", "turns", "conversation_end", "goal_reached", "turns_to_goal")


def _signal(name: str, value: float, evidence: dict[str, Any] | None = None) -> Signal:
    if evidence is None:
        # Signals are frozen, so the equal ones of many tests can be one object: most numbers
        # repeat from test to test (no tokens, no cost, one tool call), and building each was a
        # pydantic validation, about 4 of a test's 5. repr tells 0.0 from -0.0, which JSON tells apart.
        key = (name, repr(value))
        found = _SIGNALS.get(key)
        if found is None:
            if len(_SIGNALS) >= _SIGNALS_KEPT:
                _SIGNALS.clear()
            found = _SIGNALS[key] = Signal(kind="metric", role="observe", name=name, value=value)
        return found
    return Signal(kind="metric", role="observe", name=name, value=value, evidence=evidence)


_SIGNALS: dict[tuple[str, str], Signal] = {}
_SIGNALS_KEPT = 4096  # a latency is seldom met twice: the memory is bounded, not the hit rate


def metric_signals(metrics: Mapping[str, Any]) -> tuple[Signal, ...]:
    """Metrics as `metric` signals with role `observe` (never gate, never score): the headline
    numbers, problem counters that are non-zero, and trace numbers that add to the run's own."""
    out = []
    for key, name, always in _RUN_SIGNALS:
        value = metrics.get(key)
        if (value or always) and isinstance(value, (int, float)) and value is not True and value is not False:
            out.append(_signal(name, float(value)))
    for key in CONVERSATION_SIGNAL_METRICS:
        value = metrics.get(key)
        if isinstance(value, (int, float)):  # goal_reached is a bool: 1 or 0
            out.append(_signal(f"metric:{key}", float(value)))
    traces = metrics.get("traces") or {}
    if traces.get("status") == "ok":
        for key in TRACE_SIGNAL_METRICS:
            value = traces.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value != metrics.get(key):
                out.append(_signal(f"metric:traces.{key}", float(value)))
    return tuple(out)


# (key, signal name, recorded when zero) of each run metric `metric_signals` may record, in order
_RUN_SIGNALS = tuple((key, f"metric:{key}", key in SIGNAL_METRICS) for key in SIGNAL_METRICS + PROBLEM_METRICS)


def with_trace_metrics(
    prices: Mapping[str, tuple[float, float]] | None = None, wait_s: float = 0.0
) -> Callable[..., Awaitable[TestResult]]:
    """Engine analyzer (async: the trace fetch runs off the event loop): add the trace metrics
    (their status when the agent has no traces) to the result's `metrics`. `wait_s` bounds how
    long it waits for spans (default: one look, as the test body already had the chance to wait
    through `result.traces`)."""

    async def analyze(result: TestResult, traces: Any = None) -> TestResult:
        if result.run is None:
            return result
        # an agent without traces (most) needs no coroutine to say so, nor a copy when the
        # engine's run metrics said so already (`run_metrics(untraced=True)`)
        if traces is None:
            if result.metrics.get("traces") == _NOT_ENABLED:
                return result
            found = _NOT_ENABLED.copy()
        else:
            found = await atrace_metrics(traces, prices, wait_s)
        return replaced(result, {"metrics": {**result.metrics, "traces": found}})

    return analyze


def shown_signals(result: TestResult) -> tuple[Signal, ...]:
    """The result's signals as reports show them: its own, in body order, then its headline
    metrics as `metric` signals (`metric_signals`). Those are derived from `metrics` when shown:
    a result stores each number once (four signals repeating them were a fifth of a stored
    result's bytes and about 5% of a test's instructions). A name the result already holds (a
    test's own metric signal, or a result stored before they were derived) is not shown twice."""
    derived = metric_signals(result.metrics)
    if not derived:
        return result.signals
    if any(s.kind == "metric" for s in result.signals):
        held = {s.name for s in result.signals if s.kind == "metric"}
        derived = tuple(s for s in derived if s.name not in held)
    return result.signals + derived
