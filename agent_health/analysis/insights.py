"""Offline insights: rules over a test's signals and metrics, each with evidence and a concrete
recommendation. Always available; an optional synthesizer can add more (see the configuration)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Iterable

from agent_health.model import Insight, TestResult

Rule = Callable[[TestResult], Iterable[Insight]]


def _redundant_calls(r: TestResult) -> Iterable[Insight]:
    n = r.metrics.get("redundant_calls") or 0
    if n:
        yield Insight(rule="redundant_calls", severity="warning",
                      summary=f"{n} redundant tool call(s): the same tool with the same arguments",
                      evidence={"redundant_calls": n, "tool_histogram": r.metrics.get("tool_histogram", {})},
                      recommendation="Reuse earlier tool results (keep them in context or cache them) instead of "
                                     "repeating identical calls.")


def _ignored_tool_errors(r: TestResult) -> Iterable[Insight]:
    n = r.metrics.get("ignored_tool_errors") or 0
    if n:
        yield Insight(rule="ignored_tool_errors", severity="warning",
                      summary=f"{n} tool error(s) the agent ignored",
                      evidence={"tool_errors": r.metrics.get("tool_errors"), "ignored": n},
                      recommendation="Teach the agent to read tool errors and retry with corrected arguments "
                                     "(e.g. list valid metric names first).")


def _slow_step(r: TestResult) -> Iterable[Insight]:
    slow = r.metrics.get("slowest_step") or {}
    latency = r.metrics.get("latency_ms") or 0
    total = sum(s.duration_ms or 0 for s in r.run.trajectory) if r.run else 0
    if slow and total and (slow.get("duration_ms") or 0) > 0.4 * total and (slow.get("duration_ms") or 0) >= 1000:
        what = slow.get("tool") or slow.get("kind")
        yield Insight(rule="slow_step", severity="info",
                      summary=f"one step ({what}) takes {slow['duration_ms'] / max(total, 1):.0%} of the run time",
                      evidence={"slowest_step": slow, "steps_ms": round(total, 1), "latency_ms": latency},
                      recommendation=f"Narrow or parallelize {what}; it dominates latency.")


def _token_heavy(r: TestResult, limit: int = 4000) -> Iterable[Insight]:
    total = r.metrics.get("total_tokens") or 0
    if total > limit:
        yield Insight(rule="token_heavy", severity="info", summary=f"run used {total} tokens (over {limit})",
                      evidence={"total_tokens": total, "llm_calls": r.metrics.get("llm_calls")},
                      recommendation="Summarize tool results before feeding them back and trim the context "
                                     "each model call re-reads.")


def _failed_gates(r: TestResult) -> Iterable[Insight]:
    failed = [s for s in r.signals if s.role == "gate" and s.passed is False and not s.skipped]
    if failed:
        yield Insight(rule="failed_gates", severity="error",
                      summary=f"{len(failed)} gate(s) failed: " + "; ".join(s.name for s in failed[:3]),
                      evidence={"failed": [{"name": s.name, "reasoning": s.reasoning} for s in failed]},
                      recommendation="Start with the first failed gate: "
                                     + (failed[0].reasoning or failed[0].name))


RULES: tuple[Rule, ...] = (_failed_gates, _redundant_calls, _ignored_tool_errors, _slow_step, _token_heavy)


def derive_insights(result: TestResult, rules: Iterable[Rule] = RULES) -> tuple[Insight, ...]:
    """Every rule's findings for one test result."""
    return tuple(i for rule in rules for i in rule(result))


def with_insights(result: TestResult) -> TestResult:
    """Engine analyzer: attach the offline insights."""
    return result.model_copy(update={"insights": derive_insights(result)})


def rollup_recommendations(results: Iterable[TestResult]) -> list[dict[str, Any]]:
    """Suite-level recommendations, ranked by how many tests and how much cost they touch."""
    groups: dict[str, dict[str, Any]] = defaultdict(lambda: {"tests": [], "cost_usd": 0.0})
    for r in results:
        for i in r.insights:
            g = groups[i.rule]
            g.update(rule=i.rule, severity=i.severity, recommendation=i.recommendation)
            g["tests"].append(r.test_id)
            g["cost_usd"] += r.cost_usd or 0.0
    ranked = sorted(groups.values(), key=lambda g: (-len(g["tests"]), -g["cost_usd"], g["rule"]))
    return [{**g, "count": len(g["tests"]), "cost_usd": round(g["cost_usd"], 6)} for g in ranked]
