"""`expect(value)`: deterministic matchers recorded as gate signals on the current test.

A failing `expect` records and stops the body; `expect.soft(...)` records and continues.
`expect(x).not_.to_...` negates any matcher.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from agent_health.capabilities.context import TestContext, bridge, current_context
from agent_health.capabilities.judge import PendingVerdict, build_request, criteria_list, verdict_for
from agent_health.errors import ExpectationFailed
from agent_health.judges.checks import schema_problem as _schema_problem
from agent_health.judges.checks import subset as _subset
from agent_health.model import RunResult, Signal, Verdict
from agent_health.model.copies import built
from agent_health.model.limits import cut_text
from agent_health.model.run import parse_json_output

_MAX_EVIDENCE = 400


def _short(value: Any) -> Any:
    kind = type(value)  # the usual evidence first, by exact type: the same values as below
    if kind is str:
        return value if len(value) <= _MAX_EVIDENCE else _short_text(value)
    if value is None or kind is bool or kind is int or kind is float:
        return value
    if kind is dict and len(value) <= 20:
        return {k if type(k) is str else str(k): _short(v) for k, v in value.items()}
    if kind is list and len(value) <= 20:
        return [_short(v) for v in value]
    if isinstance(value, str):
        return value if len(value) <= _MAX_EVIDENCE else _short_text(value)
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    if isinstance(value, RunResult):
        return {"output": _short(value.output), "tools": [s.tool for s in value.tool_calls()]}
    if isinstance(value, (list, tuple)):
        return [_short(v) for v in list(value)[:20]]
    if isinstance(value, dict):
        return {str(k): _short(v) for k, v in list(value.items())[:20]}
    return _short(str(value))


def _short_text(value: str) -> str:
    return value[:_MAX_EVIDENCE] + f"... [{len(value) - _MAX_EVIDENCE} more chars]"


def _run(value: Any, matcher: str) -> RunResult:
    if not isinstance(value, RunResult):
        raise TypeError(f"expect(...).{matcher}() needs the RunResult from agent.run(), got {type(value).__name__}")
    return value


def _no_steps(run: RunResult, ctx: TestContext) -> str:
    """Why a run shows no tool call when its agent returned only its answer text (no tool call,
    result or thinking step): said with a failed tool matcher, so the agent is not blamed for
    calls it may have made but never reported."""
    if any(s.kind != "message" for s in run.agent_steps):
        return ""
    note = "; the agent returned no steps, only its answer text, so its tool calls cannot be seen"
    if ctx.runtime is not None and ctx.runtime.agent.connector == "python":
        note += (
            " (a python agent returns them in a dict with `steps` or `tool_calls`, or as a RunResult; "
            "docs/connectors.md#the-python-connector)"
        )
    return note


class Expectation:
    """Matchers over one value. Each records one signal with actual vs expected evidence."""

    def __init__(self, actual: Any, ctx: TestContext, *, soft: bool = False, negate: bool = False):
        self._actual, self._ctx, self._soft, self._negate = actual, ctx, soft, negate

    @property
    def not_(self) -> Expectation:
        return Expectation(self._actual, self._ctx, soft=self._soft, negate=not self._negate)

    def _check(
        self, name: str, ok: bool, *, expected: Any, actual: Any, message: str | Callable[[], str]
    ) -> Expectation:
        """Record the signal; `message` (or the function making it, called only when needed)
        says what went wrong when the check failed."""
        if self._negate:
            ok, name = not ok, f"not_.{name}"
        if not ok and not isinstance(message, str):
            message = message()
        if self._negate and not ok:
            message = f"expected not: {message}"
        fields = {
            "kind": "deterministic",
            "role": "gate",
            "name": name,
            "passed": ok,
            "score": 1.0 if ok else 0.0,
            "reasoning": None if ok else message,
            "soft": self._soft,
            "evidence": {"expected": _short(expected), "actual": _short(actual)},
        }
        if type(ok) is bool and (ok or type(message) is str):  # what validating would make: built directly
            if not ok:
                fields["reasoning"] = cut_text(message)  # type: ignore[arg-type]
            self._ctx.record(built(Signal, fields))
        else:
            self._ctx.record(Signal(**fields))
        if not ok and not self._soft:
            raise ExpectationFailed(f"{name}: {message}")
        return self

    # -- run matchers -------------------------------------------------------
    def to_have_called_tool(self, name: str, args: dict[str, Any] | None = None) -> Expectation:
        run = _run(self._actual, "to_have_called_tool")
        every = run.tool_calls()
        calls = [c for c in every if c.tool == name]
        ok = any(_subset(args, c.args or {}) for c in calls) if args else bool(calls)
        label = f"to_have_called_tool({name!r}{', ' + repr(args) if args else ''})"
        return self._check(
            label,
            ok,
            expected={"tool": name, "args": args},
            actual=[{"tool": c.tool, "args": c.args} for c in every],
            message=lambda: (
                f"tool {name!r}{' with ' + repr(args) if args else ''} was not called; "
                f"called: {[c.tool for c in every]}" + _no_steps(run, self._ctx)
            ),
        )

    def not_to_have_called_tool(self, name: str) -> Expectation:
        run = _run(self._actual, "not_to_have_called_tool")
        n = len(run.tool_calls(name))
        return self._check(
            f"not_to_have_called_tool({name!r})",
            n == 0,
            expected={"tool": name, "calls": 0},
            actual={"calls": n},
            message=f"tool {name!r} was called {n} time(s)",
        )

    def to_have_called_tools_in_order(self, names: Iterable[str]) -> Expectation:
        run = _run(self._actual, "to_have_called_tools_in_order")
        wanted, called = list(names), [c.tool for c in run.tool_calls()]
        it = iter(called)
        ok = all(any(t == w for t in it) for w in wanted)  # subsequence match
        return self._check(
            f"to_have_called_tools_in_order({wanted!r})",
            ok,
            expected=wanted,
            actual=called,
            message=f"expected {wanted} in this order within {called}" + ("" if ok else _no_steps(run, self._ctx)),
        )

    def to_ask_before_acting(self) -> Expectation:
        """The agent asked the user a question (a message of its own with a `?`) before its first
        tool call; in a conversation, the question usually ends a turn and the user answers it."""
        run = _run(self._actual, "to_ask_before_acting")
        steps = run.trajectory
        first_call = next((i for i, s in enumerate(steps) if s.kind == "tool_call"), len(steps))
        question = next(
            (
                i
                for i, s in enumerate(steps[:first_call])
                if s.kind == "message" and s.role == "assistant" and "?" in s.content
            ),
            None,
        )
        acted = (
            f"its first tool call {steps[first_call].tool!r} in turn {_turn_at(run, first_call)}"
            if first_call < len(steps)
            else "no tool call"
        )
        asked = (
            {"turn": _turn_at(run, question), "question": _short(steps[question].content)}
            if question is not None
            else None
        )
        return self._check(
            "to_ask_before_acting()",
            question is not None,
            expected="a question to the user before the first tool call",
            actual={"question": asked, "acted": acted},
            message=f"the agent asked no question before {acted}"
            if first_call < len(steps)
            else "the agent asked no question (and called no tool)",
        )

    def to_reach_goal(self, within_turns: int | None = None) -> Expectation:
        """A simulated user's conversation ended with its goal reached (within `within_turns` turns)."""
        run = _run(self._actual, "to_reach_goal")
        conv = run.conversation
        if conv is None or conv.mode != "simulated":
            raise TypeError("expect(...).to_reach_goal() needs the RunResult of agent.run(user=SimulatedUser(...))")
        reached = bool(conv.goal_reached)
        ok = reached and (within_turns is None or (conv.turns_to_goal or 0) <= within_turns)
        limit = f" within {within_turns} turns" if within_turns is not None else ""
        return self._check(
            f"to_reach_goal({f'within_turns={within_turns}' if within_turns is not None else ''})",
            ok,
            expected={"goal": _short(conv.goal), "within_turns": within_turns},
            actual={"ended": conv.ended, "turns": len(run.turns), "turns_to_goal": conv.turns_to_goal},
            message=f"the goal {conv.goal!r} was not reached{limit}: the conversation ended {conv.ended} after "
            f"{len(run.turns)} turn(s)" + (f", the goal at turn {conv.turns_to_goal}" if conv.turns_to_goal else ""),
        )

    def to_complete_within(self, seconds: float) -> Expectation:
        run = _run(self._actual, "to_complete_within")
        took = run.duration_ms / 1000
        return self._check(
            f"to_complete_within({seconds}s)",
            took <= seconds,
            expected={"max_s": seconds},
            actual={"s": round(took, 3)},
            message=f"took {took:.3f}s, limit {seconds}s",
        )

    def to_have_steps_of_type(self, kind: str, count: int | None = None) -> Expectation:
        run = _run(self._actual, "to_have_steps_of_type")
        n = len(run.steps_of_type(kind))
        ok = n == count if count is not None else n > 0
        return self._check(
            f"to_have_steps_of_type({kind!r}{', ' + str(count) if count is not None else ''})",
            ok,
            expected={"kind": kind, "count": count if count is not None else ">0"},
            actual={"count": n},
            message=f"{n} {kind} step(s), expected {count if count is not None else 'at least one'}"
            + ("" if ok or kind == "message" else _no_steps(run, self._ctx)),
        )

    def to_match_schema(self, schema: Any) -> Expectation:
        value = self._actual
        data = value.json() if isinstance(value, RunResult) else value
        if isinstance(data, str):
            data = parse_json_output(data)
        problem = _schema_problem(schema, data)
        return self._check(
            f"to_match_schema({getattr(schema, '__name__', 'schema')})",
            problem is None,
            expected=getattr(schema, "__name__", "json schema"),
            actual=data,
            message=problem or "",
        )

    # -- judge matcher ------------------------------------------------------
    def to_satisfy_judge(self, judge_or_criteria: Any, *, threshold: float | None = None) -> Any:
        """Gate on a judge's verdict, as an expectation: a hard failure stops the body, a soft one
        records and goes on. `judge_or_criteria` is what `judge()` takes (criteria, the rich dict,
        a named judge). With `threshold` the verdict's score must reach it (its own pass is not
        used). Await it in an async body; a sync body gets the Verdict directly."""
        if threshold is not None and (isinstance(threshold, bool) or not 0 <= threshold <= 1):
            raise ValueError(f"to_satisfy_judge(): threshold must be a number from 0 to 1, got {threshold!r}")
        if criteria_list(judge_or_criteria) is not None:
            raise TypeError("to_satisfy_judge() takes one criterion or judge; call it once per criterion")
        request = build_request(self._ctx, self._actual, judge_or_criteria, gate=True)
        out = bridge(self._ctx, self._satisfy(request, threshold))
        if isinstance(out, Verdict):
            return out

        pending = PendingVerdict(out)
        self._ctx.pending.append(pending)  # a forgotten await still records (and gates) after the body
        return pending

    async def _satisfy(self, request: Any, threshold: float | None) -> Verdict:
        verdict = await verdict_for(self._ctx, request)
        if threshold is None:
            ok = verdict.passed
        else:
            ok = verdict.score is not None and verdict.score >= threshold
        limit = f", threshold={threshold}" if threshold is not None else ""
        name = f"to_satisfy_judge({_short(request.criteria)!r}{limit})"
        if self._negate:
            ok, name = not ok, f"not_.{name}"
        neutral = verdict.skipped or verdict.errored
        signal = verdict.to_signal()
        evidence = dict(signal.evidence or {})
        evidence.update(
            {
                "expected": {"criteria": _short(request.criteria), "threshold": threshold, "negated": self._negate},
                "actual": {"passed": verdict.passed, "score": verdict.score, "reasoning": _short(verdict.reasoning)},
            }
        )
        self._ctx.record(
            signal.model_copy(
                update={
                    "name": name,
                    "passed": None if neutral else ok,
                    "soft": self._soft,
                    "evidence": evidence,
                    "reasoning": signal.reasoning
                    if ok or neutral
                    else f"{verdict.reasoning} (score {verdict.score}"
                    + (f", threshold {threshold})" if threshold is not None else ")"),
                }
            )
        )
        stop = (verdict.errored or not (ok or verdict.skipped)) and not self._soft
        if stop:
            raise ExpectationFailed(f"{name}: {verdict.error if verdict.errored else verdict.reasoning}")
        return verdict

    # -- value matchers -----------------------------------------------------
    def _text(self) -> str:
        v = self._actual
        return v.output if isinstance(v, RunResult) else v if isinstance(v, str) else str(v)

    def to_match(self, pattern: str | re.Pattern[str]) -> Expectation:
        rx = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern, re.IGNORECASE)
        text = self._text()
        return self._check(
            f"to_match({rx.pattern!r})",
            rx.search(text) is not None,
            expected=rx.pattern,
            actual=text,
            message=f"{_short(text)!r} does not match /{rx.pattern}/",
        )

    def to_contain(self, item: Any) -> Expectation:
        v = self._actual
        hay = self._text() if isinstance(v, (str, RunResult)) else v
        try:
            ok = item in hay
        except TypeError:
            ok = False
        return self._check(
            f"to_contain({_short(item)!r})",
            ok,
            expected=item,
            actual=hay,
            message=f"{_short(hay)!r} does not contain {item!r}",
        )

    def to_equal(self, expected: Any) -> Expectation:
        return self._check(
            f"to_equal({_short(expected)!r})",
            self._actual == expected,
            expected=expected,
            actual=self._actual,
            message=f"{_short(self._actual)!r} != {_short(expected)!r}",
        )

    def to_be_less_than(self, limit: float) -> Expectation:
        value = _num(self._actual)
        ok = value is not None and value < limit
        return self._check(
            f"to_be_less_than({limit})",
            ok,
            expected={"<": limit},
            actual=self._actual,
            message=f"{self._actual!r} is not less than {limit}",
        )

    def to_be_greater_than(self, limit: float) -> Expectation:
        value = _num(self._actual)
        ok = value is not None and value > limit
        return self._check(
            f"to_be_greater_than({limit})",
            ok,
            expected={">": limit},
            actual=self._actual,
            message=f"{self._actual!r} is not greater than {limit}",
        )

    def to_be_truthy(self) -> Expectation:
        return self._check(
            "to_be_truthy()",
            bool(self._actual),
            expected=True,
            actual=self._actual,
            message=f"{_short(self._actual)!r} is not truthy",
        )

    def to_pass(self) -> Expectation:
        """For a Verdict: gate on it (a skipped verdict passes, an errored one fails)."""
        v = self._actual
        if not isinstance(v, Verdict):
            raise TypeError(f"expect(...).to_pass() needs a Verdict, got {type(v).__name__}")
        return self._check(
            f"to_pass({v.criteria!r})",
            v.skipped or (v.passed and not v.errored),
            expected="pass",
            actual={"passed": v.passed, "reasoning": v.reasoning},
            message=v.error or v.reasoning,
        )


def _turn_at(run: RunResult, index: int) -> int:
    """The turn (1-based) holding trajectory step `index`; 1 in a run of one turn."""
    return next((t.index for t in run.turns if t.start <= index < t.end), 1)


def _num(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class ExpectAPI:
    """The `expect` fixture/function. Bound to the current test through a ContextVar."""

    def __call__(self, value: Any) -> Expectation:
        return Expectation(value, current_context("expect()"))

    def soft(self, value: Any) -> Expectation:
        """Record the outcome and let the body continue on failure."""
        return Expectation(value, current_context("expect.soft()"), soft=True)


expect = ExpectAPI()
