"""`judge(result, criteria)`: records a Verdict on the current test and returns it; never raises.

`judge(result, ["a", "b"])` gives one verdict per criterion; `judge(result, ToolCallJudge(...))`
runs a named judge (judges/kit.py). `judge.observe(...)` records a non-gating verdict. In an async
body `await` it; in a sync body it returns the Verdict directly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from agent_health.capabilities.context import Pending, TestContext, bridge, current_context
from agent_health.judges.kit import as_judge
from agent_health.model import RunResult, Verdict
from agent_health.model.judge import JudgeRequest

_RICH_KEYS = {"criteria", "context", "tools", "evaluator", "model", "gate", "options"}


Criteria = str | Mapping[str, Any] | Any  # a string, the rich dict form, or a named judge (judges/kit.py)


def build_request(ctx: TestContext, subject: Any, criteria: Criteria, *, gate: bool, **kw: Any) -> JudgeRequest:
    named = as_judge(criteria)
    if named is None and isinstance(criteria, Mapping):
        named = as_judge(criteria.get("criteria"))
    spec: dict[str, Any] = dict(criteria) if isinstance(criteria, Mapping) else {"criteria": criteria}
    spec.update({k: v for k, v in kw.items() if v is not None})
    unknown = set(spec) - _RICH_KEYS
    if unknown:
        raise TypeError(f"judge(): unknown option(s) {sorted(unknown)}; known: {sorted(_RICH_KEYS)}")
    if named is not None:
        spec["criteria"] = named.label
    elif isinstance(spec.get("criteria"), (list, tuple)):
        raise TypeError("judge(): a list of criteria is one call per criterion: `judge(result, ['a', 'b'])`")
    if not isinstance(spec.get("criteria"), str) or not spec["criteria"].strip():
        raise TypeError(
            "judge() needs criteria: a non-empty string, a list of them, or a named judge "
            f"(Factuality, ToolCallJudge, StructuredOutputJudge, create_judge(...)); got {type(criteria).__name__}"
        )
    gate = bool(spec.get("gate", gate))
    run = subject if isinstance(subject, RunResult) else None
    return JudgeRequest(
        criteria=spec["criteria"].strip(),
        run=run,
        output=run.output if run is not None else _text(subject, named is not None),
        context=tuple(spec.get("context") or ("output", "trajectory")),
        tools=tuple(spec.get("tools") or ()),
        evaluator=spec.get("evaluator"),
        model=spec.get("model"),
        role="gate" if gate else "observe",
        test_id=ctx.case.id,
        options=dict(spec.get("options") or {}),
        trace_tools=_trace_tools(ctx, run),
        judge=named,
        subject=None if run is not None else subject,
    )


def _text(subject: Any, named: bool) -> str:
    """The judged text of a plain value; a named judge sees a dict or list as JSON."""
    if subject is None:
        return ""
    if named and isinstance(subject, (dict, list)):
        return json.dumps(subject, default=str)
    return str(subject)


def criteria_list(criteria: Any) -> list[Any] | None:
    """The criteria of `judge(result, [...])` (strings or named judges), or None for one criterion."""
    if not isinstance(criteria, (list, tuple)):
        return None
    if not criteria:
        raise TypeError("judge(): the list of criteria is empty")
    return list(criteria)


def _trace_tools(ctx: TestContext, run: RunResult | None) -> Any:
    """Run-scoped trace-query tools when the run's agent has traces, else None."""
    view = ctx.trace_views.get(run.run_id) if run is not None else None
    return view.tools if view is not None else None


async def verdict_for(ctx: TestContext, request: JudgeRequest) -> Verdict:
    """The verdict on one request, not recorded: the cost cap's refusal, or the judge service's."""
    if ctx.cost_cap_usd is not None and not ctx.skip_judge:
        spent = ctx.spent_usd()
        if spent is not None and spent > ctx.cost_cap_usd:  # the call would only add to a test already over
            return Verdict(
                passed=False,
                errored=True,
                criteria=request.criteria,
                role=request.role,
                evaluator="cost cap",
                error=f"not judged: the test's cost ${spent:.6f} already passed its cap of ${ctx.cost_cap_usd:g}",
            )
    return await ctx.judges.judge(request, skip=ctx.skip_judge)


async def _judge(ctx: TestContext, request: JudgeRequest) -> Verdict:
    verdict = await verdict_for(ctx, request)
    ctx.record(verdict.to_signal())
    return verdict


async def judge_all(ctx: TestContext, requests: list[JudgeRequest]) -> list[Verdict]:
    """One verdict per criterion, asked concurrently (the service's limit applies), recorded in order."""
    verdicts = await asyncio.gather(*(verdict_for(ctx, r) for r in requests))
    for verdict in verdicts:
        ctx.record(verdict.to_signal())
    return list(verdicts)


class PendingVerdict(Pending):
    """What `judge()` returns in an async body: await it for the Verdict. The engine awaits any
    that the body forgot, so a verdict is never silently lost."""

    def or_throw(self) -> None:
        raise TypeError("judge() must be awaited first: `(await judge(result, criteria)).or_throw()`")

    to_pass = or_throw


class JudgeAPI:
    """The `judge` fixture/function."""

    def __call__(self, result: Any, criteria: Criteria, *, gate: bool = True, **kw: Any) -> Any:
        """One Verdict; a list of criteria (strings or named judges) gives a list, one per criterion."""
        ctx = current_context("judge()")
        many = criteria_list(criteria)
        if many is not None:
            requests = [build_request(ctx, result, c, gate=gate, **kw) for c in many]
            out = bridge(ctx, judge_all(ctx, requests))
        else:
            out = bridge(ctx, _judge(ctx, build_request(ctx, result, criteria, gate=gate, **kw)))
        if isinstance(out, (Verdict, list)):
            return out
        pending = PendingVerdict(out)
        ctx.pending.append(pending)
        return pending

    def observe(self, result: Any, criteria: Criteria, **kw: Any) -> Any:
        """Record a verdict that feeds score and insights but never gates."""
        kw.pop("gate", None)
        return self(result, criteria, gate=False, **kw)


judge = JudgeAPI()
