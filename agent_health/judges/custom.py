"""Custom evaluators from the configuration: `evaluators={"name": fn}`.

`fn` runs in-process and may take any of these parameters, by name: `result` (the RunResult, or
the judged value), `criteria`, `tools` (the run's trace-query tools: `tools.get_spans()` or
`tools.trace_query.get_spans()`), `llm` (the cached `LLM` helper: `await llm.complete(prompt)`,
which raises `AnswerCutOff` for an answer cut off at the model's length limit),
`request` (the full JudgeRequest), `output`, `context`. It returns a `Verdict`, a dict with
`pass`/`passed`, `score`, `reasoning` (and optional `details`), or a bool. Sync functions are fine
unless they need `llm` (which is async).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from agent_health.judges.llm import CachedLLM
from agent_health.judges.parse import AnswerError, number
from agent_health.model import Verdict
from agent_health.model.judge import JudgeRequest
from agent_health.offloop import call
from agent_health.traces.tools import RunTraceTools
from agent_health.traces.view import TracesNotEnabled


class EvaluatorTools:
    """The `tools` argument: the run's trace tools, or a clear error on first use without traces."""

    def __init__(self, trace_tools: RunTraceTools | None, agent: str = ""):
        self._tools = trace_tools
        self._agent = agent

    @property
    def trace_query(self) -> RunTraceTools:
        if self._tools is None:
            raise TracesNotEnabled(
                f"evaluator used trace tools but agent {self._agent or '?'} has no trace source; "
                "configure traces for this agent"
            )
        return self._tools

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.trace_query, name)


def _kwargs(fn: Callable[..., Any], available: dict[str, Any]) -> dict[str, Any]:
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return available
    unknown = [
        n
        for n, p in params.items()
        if n not in available
        and p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL,)
    ]
    if unknown:
        raise TypeError(f"parameters {unknown} are not provided; an evaluator may take {sorted(available)}")
    return {n: available[n] for n in params if n in available}


def coerce(value: Any, name: str, request: JudgeRequest) -> Verdict:
    """Turn what an evaluator returned into a Verdict (TypeError naming the evaluator otherwise)."""
    base = {"criteria": request.criteria, "role": request.role, "evaluator": name}
    if isinstance(value, Verdict):
        return value.model_copy(update={k: v for k, v in base.items() if k != "evaluator" or value.evaluator == "demo"})
    if isinstance(value, bool):
        return Verdict(
            passed=value, score=1.0 if value else 0.0, reasoning=f"evaluator {name!r} returned {value}", **base
        )
    if isinstance(value, dict):
        key = "pass" if "pass" in value else "passed" if "passed" in value else None
        if key is None or not isinstance(value[key], bool):
            raise TypeError(f"evaluator {name!r} returned a dict without a boolean `pass`: {sorted(value)}")
        score = value.get("score")
        if score is not None:
            try:
                score = number(score, "score", 0, 1)
            except AnswerError as exc:
                raise TypeError(f"evaluator {name!r}: {exc}") from exc
        return Verdict(
            passed=value[key],
            score=score if score is not None else (1.0 if value[key] else 0.0),
            reasoning=str(value.get("reasoning", "")),
            details=dict(value.get("details") or {}),
            model=value.get("model"),
            **base,
        )
    raise TypeError(
        f"evaluator {name!r} returned {type(value).__name__}; return a Verdict, a dict with "
        "pass/score/reasoning, or a bool"
    )


async def run_custom(name: str, fn: Callable[..., Any], request: JudgeRequest, llm: CachedLLM) -> Verdict:
    """Run one custom evaluator in-process; its LLM tokens become the verdict's judge usage."""
    available = {
        "result": request.run if request.run is not None else request.output,
        "criteria": request.criteria,
        "tools": EvaluatorTools(request.trace_tools, request.run.agent if request.run else ""),
        "llm": llm,
        "request": request,
        "output": request.output,
        "context": request.context,
    }
    try:
        kwargs = _kwargs(fn, available)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"evaluator {name!r}: {exc}") from exc
    value = await call(fn, **kwargs)  # a sync evaluator runs in a worker thread, off the event loop
    verdict = coerce(value, name, request)
    return verdict.model_copy(
        update={
            "usage": verdict.usage + llm.usage,
            "model": verdict.model or llm.model,
            "cached": verdict.cached or llm.served_from_cache,
        }
    )
