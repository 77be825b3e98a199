"""`judge(result, criteria)`: records a Verdict on the current test and returns it; never raises.

`judge.observe(...)` records a non-gating verdict. In an async body `await` it; in a sync body
it returns the Verdict directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_health.capabilities.context import Pending, TestContext, bridge, current_context
from agent_health.model import RunResult, Verdict
from agent_health.model.judge import JudgeRequest

_RICH_KEYS = {"criteria", "context", "tools", "evaluator", "model", "gate", "options"}


def build_request(
    ctx: TestContext, subject: Any, criteria: str | Mapping[str, Any], *, gate: bool, **kw: Any
) -> JudgeRequest:
    spec: dict[str, Any] = dict(criteria) if isinstance(criteria, Mapping) else {"criteria": criteria}
    spec.update({k: v for k, v in kw.items() if v is not None})
    unknown = set(spec) - _RICH_KEYS
    if unknown:
        raise TypeError(f"judge(): unknown option(s) {sorted(unknown)}; known: {sorted(_RICH_KEYS)}")
    if not isinstance(spec.get("criteria"), str) or not spec["criteria"].strip():
        raise TypeError("judge() needs criteria: a non-empty string")
    gate = bool(spec.get("gate", gate))
    run = subject if isinstance(subject, RunResult) else None
    return JudgeRequest(
        criteria=spec["criteria"].strip(),
        run=run,
        output=run.output if run is not None else ("" if subject is None else str(subject)),
        context=tuple(spec.get("context") or ("output", "trajectory")),
        tools=tuple(spec.get("tools") or ()),
        evaluator=spec.get("evaluator"),
        model=spec.get("model"),
        role="gate" if gate else "observe",
        test_id=ctx.case.id,
        options=dict(spec.get("options") or {}),
        trace_tools=_trace_tools(ctx, run),
    )


def _trace_tools(ctx: TestContext, run: RunResult | None) -> Any:
    """Run-scoped trace-query tools when the run's agent has traces, else None."""
    view = ctx.trace_views.get(run.run_id) if run is not None else None
    return view.tools if view is not None else None


async def _judge(ctx: TestContext, request: JudgeRequest) -> Verdict:
    if ctx.cost_cap_usd is not None and not ctx.skip_judge:
        spent = ctx.spent_usd()
        if spent is not None and spent > ctx.cost_cap_usd:  # the call would only add to a test already over
            verdict = Verdict(
                passed=False,
                errored=True,
                criteria=request.criteria,
                role=request.role,
                evaluator="cost cap",
                error=f"not judged: the test's cost ${spent:.6f} already passed its cap of ${ctx.cost_cap_usd:g}",
            )
            ctx.record(verdict.to_signal())
            return verdict
    verdict = await ctx.judges.judge(request, skip=ctx.skip_judge)
    ctx.record(verdict.to_signal())
    return verdict


class PendingVerdict(Pending):
    """What `judge()` returns in an async body: await it for the Verdict. The engine awaits any
    that the body forgot, so a verdict is never silently lost."""

    def or_throw(self) -> None:
        raise TypeError("judge() must be awaited first: `(await judge(result, criteria)).or_throw()`")

    to_pass = or_throw


class JudgeAPI:
    """The `judge` fixture/function."""

    def __call__(self, result: Any, criteria: str | Mapping[str, Any], *, gate: bool = True, **kw: Any) -> Any:
        ctx = current_context("judge()")
        out = bridge(ctx, _judge(ctx, build_request(ctx, result, criteria, gate=gate, **kw)))
        if isinstance(out, Verdict):
            return out
        pending = PendingVerdict(out)
        ctx.pending.append(pending)
        return pending

    def observe(self, result: Any, criteria: str | Mapping[str, Any], **kw: Any) -> Any:
        """Record a verdict that feeds score and insights but never gates."""
        kw.pop("gate", None)
        return self(result, criteria, gate=False, **kw)


judge = JudgeAPI()
