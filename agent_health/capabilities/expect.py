"""`expect(value)`: deterministic matchers recorded as gate signals on the current test.

A failing `expect` records and stops the body; `expect.soft(...)` records and continues.
`expect(x).not_.to_...` negates any matcher.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import pydantic

from agent_health.capabilities.context import TestContext, current_context
from agent_health.errors import ExpectationFailed
from agent_health.model import RunResult, Signal, Verdict

_MAX_EVIDENCE = 400


def _short(value: Any) -> Any:
    if isinstance(value, str):
        if len(value) > _MAX_EVIDENCE:
            return value[:_MAX_EVIDENCE] + f"... [{len(value) - _MAX_EVIDENCE} more chars]"
        return value
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    if isinstance(value, RunResult):
        return {"output": _short(value.output), "tools": [s.tool for s in value.tool_calls()]}
    if isinstance(value, (list, tuple)):
        return [_short(v) for v in list(value)[:20]]
    if isinstance(value, dict):
        return {str(k): _short(v) for k, v in list(value.items())[:20]}
    return _short(str(value))


def _subset(expected: Any, actual: Any) -> bool:
    """Expected args match when every expected key is present with a matching value."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _subset(v, actual[k]) for k, v in expected.items())
    return bool(expected == actual)  # user values: __eq__ may return anything


def _run(value: Any, matcher: str) -> RunResult:
    if not isinstance(value, RunResult):
        raise TypeError(f"expect(...).{matcher}() needs the RunResult from agent.run(), got {type(value).__name__}")
    return value


class Expectation:
    """Matchers over one value. Each records one signal with actual vs expected evidence."""

    def __init__(self, actual: Any, ctx: TestContext, *, soft: bool = False, negate: bool = False):
        self._actual, self._ctx, self._soft, self._negate = actual, ctx, soft, negate

    @property
    def not_(self) -> Expectation:
        return Expectation(self._actual, self._ctx, soft=self._soft, negate=not self._negate)

    def _check(self, name: str, ok: bool, *, expected: Any, actual: Any, message: str) -> Expectation:
        if self._negate:
            ok, name, message = not ok, f"not_.{name}", f"expected not: {message}"
        self._ctx.record(
            Signal(
                kind="deterministic",
                role="gate",
                name=name,
                passed=ok,
                score=1.0 if ok else 0.0,
                reasoning=None if ok else message,
                soft=self._soft,
                evidence={"expected": _short(expected), "actual": _short(actual)},
            )
        )
        if not ok and not self._soft:
            raise ExpectationFailed(f"{name}: {message}")
        return self

    # -- run matchers -------------------------------------------------------
    def to_have_called_tool(self, name: str, args: dict[str, Any] | None = None) -> Expectation:
        run = _run(self._actual, "to_have_called_tool")
        calls = run.tool_calls(name)
        ok = any(_subset(args, c.args or {}) for c in calls) if args else bool(calls)
        label = f"to_have_called_tool({name!r}{', ' + repr(args) if args else ''})"
        return self._check(
            label,
            ok,
            expected={"tool": name, "args": args},
            actual=[{"tool": c.tool, "args": c.args} for c in run.tool_calls()],
            message=f"tool {name!r}{' with ' + repr(args) if args else ''} was not called; "
            f"called: {[c.tool for c in run.tool_calls()]}",
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
            message=f"expected {wanted} in this order within {called}",
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
            message=f"{n} {kind} step(s), expected {count if count is not None else 'at least one'}",
        )

    def to_match_schema(self, schema: Any) -> Expectation:
        value = self._actual
        data = value.json() if isinstance(value, RunResult) else value
        if isinstance(data, str):
            from agent_health.model.run import parse_json_output

            data = parse_json_output(data)
        problem = _schema_problem(schema, data)
        return self._check(
            f"to_match_schema({getattr(schema, '__name__', 'schema')})",
            problem is None,
            expected=getattr(schema, "__name__", "json schema"),
            actual=data,
            message=problem or "",
        )

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


def _num(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _json_path(parts: Iterable[Any]) -> str:
    """`$.items[0].name` from a sequence of keys and indexes (pydantic `loc`, jsonschema `path`)."""
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _schema_problem(schema: Any, data: Any, max_errors: int = 5) -> str | None:
    """None when `data` fits a pydantic model class or a JSON schema; else every problem with its JSON path.

    An invalid JSON schema (a typo such as `"type": "strng"`) or a `$ref` that cannot be resolved
    raises ValueError naming the problem: a broken schema must not pass silently.
    """
    if data is None:
        return "output is not JSON"
    if isinstance(schema, type) and hasattr(schema, "model_validate"):
        try:
            schema.model_validate(data)
        except pydantic.ValidationError as exc:
            details = "; ".join(f"{_json_path(e['loc'])}: {e['msg']}" for e in exc.errors()[:max_errors])
            return str(exc).splitlines()[0] + ": " + details
        else:
            return None
    if not isinstance(schema, (dict, bool)):
        raise TypeError(
            f"to_match_schema() needs a pydantic model class or a JSON schema (dict), got {type(schema).__name__}"
        )
    import jsonschema
    from referencing.exceptions import Unresolvable

    validator_class = jsonschema.validators.validator_for(schema)  # the $schema's draft; the latest by default
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"to_match_schema(): invalid JSON schema at {exc.json_path}: {exc.message}") from None
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    try:
        errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    except Unresolvable as exc:
        raise ValueError(f"to_match_schema(): the schema's reference cannot be resolved: {exc}") from None
    if not errors:
        return None
    shown = "; ".join(f"{e.json_path}: {e.message}" for e in errors[:max_errors])
    return shown + (f" (and {len(errors) - max_errors} more)" if len(errors) > max_errors else "")


class ExpectAPI:
    """The `expect` fixture/function. Bound to the current test through a ContextVar."""

    def __call__(self, value: Any) -> Expectation:
        return Expectation(value, current_context("expect()"))

    def soft(self, value: Any) -> Expectation:
        """Record the outcome and let the body continue on failure."""
        return Expectation(value, current_context("expect.soft()"), soft=True)


expect = ExpectAPI()
