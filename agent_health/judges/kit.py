"""Named judges a test author writes in one line: `judge(result, ToolCallJudge(expected=[...]))`,
`await expect(result).to_satisfy_judge(Factuality(expected="..."))`.

A `Judge` turns one judged value into one verdict. `ToolCallJudge` and `StructuredOutputJudge` are
deterministic (no model is asked); `Factuality` asks the run's judge model through the same path as
`judge(result, criteria)` (fenced prompt, nonce, cache, cost accounting). `create_judge(name, fn)`
makes a custom one from a function, as vitest-evals' `createJudge`.

The judge service runs them (`JudgeService.judge` on a request whose `judge` is set); this module
stays light (no LLM client, no cache) because eval files import it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from agent_health.judges.checks import schema_problem, subset
from agent_health.model import RunResult, Verdict
from agent_health.model.judge import JudgeRequest
from agent_health.model.run import parse_json_output
from agent_health.offloop import call

if TYPE_CHECKING:  # pragma: no cover
    from agent_health.judges.llm import CachedLLM


@dataclass
class JudgeContext:
    """What a judge's `assess` gets: the judged run or value, and the judge model when it needs one."""

    request: JudgeRequest
    ask_model: Callable[[str, str | None, str | None], Awaitable[Verdict]]
    make_llm: Callable[[], CachedLLM]
    subject: Any = None  # the judged value itself (a dict stays a dict), None when a RunResult
    _llm: CachedLLM | None = None

    @property
    def run(self) -> RunResult | None:
        return self.request.run

    @property
    def output(self) -> str:
        return self.request.output

    @property
    def prompt(self) -> str | None:
        return self.request.run.prompt if self.request.run is not None else None

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The run's tool calls in order, as `{"name": ..., "args": {...}}` (empty for a plain value)."""
        run = self.request.run
        return [{"name": s.tool, "args": dict(s.args or {})} for s in run.tool_calls()] if run is not None else []

    def data(self) -> Any:
        """The judged value as data: a run's output parsed as JSON, a dict or list as it is, None if not JSON."""
        if self.subject is not None and not isinstance(self.subject, str):
            return self.subject
        return parse_json_output(self.output)

    @property
    def llm(self) -> CachedLLM:
        """The cached `llm` helper bound to the judge model (`await ctx.llm.complete(prompt)`)."""
        if self._llm is None:
            self._llm = self.make_llm()
        return self._llm

    async def ask(self, criteria: str, *, model: str | None = None, claim: str | None = None) -> Verdict:
        """Ask the judge model whether `criteria` holds of the judged output, as `judge()` does.
        `claim`: the plain claim the offline demo judge checks instead (criteria minus instructions)."""
        return await self.ask_model(criteria, model, claim)


class Judge:
    """A named judge. Subclass it and implement `assess(ctx)`, returning a `Verdict`, a bool, a
    score (0-1), or a dict with `score` and optionally `pass`, `reasoning`/`rationale` and
    `details`/`metadata`. Without a `pass`, the verdict passes when the score reaches `threshold`
    (1.0 unless given)."""

    name: ClassVar[str] = ""
    uses_model: ClassVar[bool] = False  # whether it asks the judge model (documentation, identity)
    threshold: float | None = None  # also for a subclass whose __init__ does not call super().__init__

    def __init__(self, *, threshold: float | None = None):
        if threshold is not None and not 0 <= threshold <= 1:
            raise ValueError(f"{self.judge_name}: threshold must be between 0 and 1, got {threshold}")
        self.threshold = threshold

    @property
    def judge_name(self) -> str:
        return self.name or type(self).__name__

    def options(self) -> dict[str, Any]:
        """The judge's configuration: its label, and part of its identity's definition hash."""
        return {}

    @property
    def label(self) -> str:
        """`ToolCallJudge(expected=['search_logs'])`: the criteria its verdicts record."""
        args = ", ".join(f"{k}={_short_repr(v)}" for k, v in self.options().items())
        return f"{self.judge_name}({args})"

    async def assess(self, ctx: JudgeContext) -> Any:
        raise NotImplementedError(f"{self.judge_name} does not implement assess(ctx)")

    def __repr__(self) -> str:
        return self.label


def _short_repr(value: Any, limit: int = 120) -> str:
    text = getattr(value, "__name__", None) if isinstance(value, type) else None
    text = text or repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def as_judge(value: Any) -> Judge | None:
    """A Judge instance for a Judge or a Judge class (built with no options); None otherwise."""
    if isinstance(value, Judge):
        return value
    if isinstance(value, type) and issubclass(value, Judge):
        return value()
    return None


def to_verdict(value: Any, judge: Judge, request: JudgeRequest) -> Verdict:
    """What `assess` returned, as a verdict (TypeError naming the judge for anything else)."""
    name = judge.judge_name
    threshold = 1.0 if judge.threshold is None else judge.threshold
    base = {"criteria": request.criteria, "role": request.role, "evaluator": name}
    if isinstance(value, Verdict):
        verdict = value.model_copy(update=base)
        if judge.threshold is not None and verdict.score is not None and not (verdict.errored or verdict.skipped):
            verdict = verdict.model_copy(update={"passed": verdict.score >= judge.threshold})
        return verdict
    if isinstance(value, bool):
        return Verdict(passed=value, score=1.0 if value else 0.0, reasoning=f"{name} returned {value}", **base)
    if isinstance(value, (int, float)):
        value = {"score": value}
    if not isinstance(value, Mapping):
        raise TypeError(
            f"judge {name!r} returned {type(value).__name__}; return a Verdict, a bool, a score, "
            "or a dict with score/pass/reasoning"
        )
    score = value.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1):
        raise TypeError(f"judge {name!r} returned score {score!r}; a score is a number from 0 to 1")
    key = "pass" if "pass" in value else "passed" if "passed" in value else None
    if key is None and score is None:
        raise TypeError(f"judge {name!r} returned a dict with neither `score` nor `pass`: {sorted(value)}")
    if key is not None and not isinstance(value[key], bool):
        raise TypeError(f"judge {name!r} returned a non-boolean `{key}`: {value[key]!r}")
    details = dict(value.get("details") or value.get("metadata") or {})
    reasoning = value.get("reasoning") or details.get("rationale") or ""
    if key is not None and judge.threshold is None:
        passed = value[key]
    else:
        passed = score is not None and score >= threshold
    return Verdict(
        passed=passed,
        score=float(score) if score is not None else (1.0 if passed else 0.0),
        reasoning=str(reasoning),
        details=details,
        **base,
    )


async def run_judge(judge: Judge, ctx: JudgeContext) -> Verdict:
    """Run one named judge; what its `llm` helper spent is the verdict's judge usage."""
    value = await call(judge.assess, ctx)
    verdict = to_verdict(value, judge, ctx.request)
    llm = ctx._llm
    if llm is not None:
        verdict = verdict.model_copy(
            update={"usage": verdict.usage + llm.usage, "model": verdict.model or llm.model, "cached": verdict.cached}
        )
    return verdict


# -- built-in judges ----------------------------------------------------------------------------
def _needs_run(ctx: JudgeContext, name: str) -> RunResult:
    if ctx.run is None:
        raise TypeError(f"{name} judges a RunResult (from agent.run()), got a plain value")
    return ctx.run


class ToolCallJudge(Judge):
    """The run called the expected tools (names, or `{"name": ..., "args": {...}}` where the given
    args must be among the call's), in order unless `ordered=False`. Deterministic.

    Partial credit: each expected call scores 1 when found with its args, 0.5 when the tool was
    called with other args, 0 when it was not called; the score is their mean (over the calls made
    too, when `allow_extra=False`). The verdict passes at `threshold` (default 1.0: every call)."""

    name = "ToolCallJudge"

    def __init__(
        self,
        expected: Sequence[str | Mapping[str, Any]],
        *,
        ordered: bool = True,
        allow_extra: bool = True,
        threshold: float | None = None,
    ):
        super().__init__(threshold=threshold)
        if isinstance(expected, (str, Mapping)):
            expected = [expected]
        self.expected: list[dict[str, Any]] = []
        for item in expected:
            if isinstance(item, str):
                self.expected.append({"name": item, "args": None})
            elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
                self.expected.append({"name": item["name"], "args": item.get("args")})
            else:
                raise TypeError(
                    f"ToolCallJudge: an expected call is a tool name or {{'name': ..., 'args': ...}}, got {item!r}"
                )
        if not self.expected:
            raise ValueError("ToolCallJudge needs at least one expected tool call")
        self.ordered, self.allow_extra = ordered, allow_extra

    def options(self) -> dict[str, Any]:
        wanted = [e["name"] if e["args"] is None else e for e in self.expected]
        extra = {"ordered": False} if not self.ordered else {}
        return {"expected": wanted, **extra, **({"allow_extra": False} if not self.allow_extra else {})}

    async def assess(self, ctx: JudgeContext) -> dict[str, Any]:
        _needs_run(ctx, self.name)
        calls = ctx.tool_calls
        used: set[int] = set()
        start, rows, total = 0, [], 0.0
        for want in self.expected:
            window = range(start, len(calls)) if self.ordered else range(len(calls))
            named = [i for i in window if i not in used and calls[i]["name"] == want["name"]]
            full = [i for i in named if want["args"] is None or subset(want["args"], calls[i]["args"])]
            pick = full[0] if full else named[0] if named else None
            credit = 1.0 if full else 0.5 if named else 0.0
            total += credit
            if pick is not None:
                used.add(pick)
                if self.ordered:
                    start = pick + 1
            rows.append(
                {
                    "tool": want["name"],
                    "expected_args": want["args"],
                    "credit": credit,
                    "actual_args": calls[pick]["args"] if pick is not None else None,
                }
            )
        extra = [calls[i]["name"] for i in range(len(calls)) if i not in used]
        denominator = len(self.expected) if self.allow_extra else max(len(self.expected), len(used) + len(extra))
        problems = [
            f"{r['tool']} not called{' in order' if self.ordered and r['tool'] in [c['name'] for c in calls] else ''}"
            if r["credit"] == 0
            else f"{r['tool']} called with {r['actual_args']}, expected {r['expected_args']}"
            for r in rows
            if r["credit"] < 1
        ]
        if extra and not self.allow_extra:
            problems.append(f"unexpected calls: {extra}")
        matched = sum(1 for r in rows if r["credit"] == 1)
        reasoning = f"{matched}/{len(self.expected)} expected tool calls matched; called: {[c['name'] for c in calls]}"
        return {
            "score": round(total / denominator, 6),
            "reasoning": reasoning + (" (" + "; ".join(problems) + ")" if problems else ""),
            "details": {"expected": rows, "called": [c["name"] for c in calls], "extra": extra},
        }


class StructuredOutputJudge(Judge):
    """The output is JSON that fits `schema` (a JSON Schema dict or a pydantic model class), then
    each field of `expected` (a key, or a dotted path such as `"refund.amount"`) equals its value or
    satisfies it (a function returning a bool). Deterministic.

    Score: 0 when the output does not fit the schema, else the share of expected fields that match
    (1.0 with no `expected`). Passes at `threshold` (default 1.0)."""

    name = "StructuredOutputJudge"

    def __init__(
        self,
        schema: Any = None,
        *,
        expected: Mapping[str, Any] | None = None,
        threshold: float | None = None,
    ):
        super().__init__(threshold=threshold)
        if schema is None and not expected:
            raise ValueError("StructuredOutputJudge needs a schema, expected fields, or both")
        if schema is not None:
            schema_problem(schema, {}, what="StructuredOutputJudge")  # a broken schema fails here, at the call
        self.schema = schema
        self.expected = dict(expected or {})

    def options(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.schema is not None:
            out["schema"] = self.schema
        if self.expected:
            out["expected"] = {k: getattr(v, "__name__", v) if callable(v) else v for k, v in self.expected.items()}
        return out

    async def assess(self, ctx: JudgeContext) -> dict[str, Any]:
        data = ctx.data()
        if data is None:
            return {"score": 0.0, "pass": False, "reasoning": "output is not JSON", "details": {"schema": "not JSON"}}
        if self.schema is not None and (problem := schema_problem(self.schema, data, what=self.name)):
            return {"score": 0.0, "pass": False, "reasoning": f"does not fit the schema: {problem}"}
        fields: dict[str, Any] = {}
        for path, want in self.expected.items():
            found, actual = _lookup(data, path)
            ok = found and (bool(want(actual)) if callable(want) else bool(actual == want))
            fields[path] = {"ok": ok, "actual": actual if found else "<missing>"}
        wrong = [f"{p}: got {f['actual']!r}" for p, f in fields.items() if not f["ok"]]
        score = (len(fields) - len(wrong)) / len(fields) if fields else 1.0
        reasoning = "fits the schema" if self.schema is not None else "is JSON"
        if fields:
            reasoning += f"; {len(fields) - len(wrong)}/{len(fields)} expected fields match"
        return {
            "score": round(score, 6),
            "reasoning": reasoning + (" (" + "; ".join(wrong) + ")" if wrong else ""),
            "details": {"fields": fields},
        }


def _lookup(data: Any, path: str) -> tuple[bool, Any]:
    """(found, value) at a dotted path (`items.0.name`: list indexes as numbers)."""
    value = data
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return False, None
    return True, value


class Factuality(Judge):
    """The output is factually consistent with an expected answer: it may add detail, but must not
    contradict it or leave out its key facts. Asks the judge model (`model=` overrides it)."""

    name = "Factuality"
    uses_model = True

    def __init__(self, expected: str, *, model: str | None = None, threshold: float | None = None):
        super().__init__(threshold=threshold)
        if not isinstance(expected, str) or not expected.strip():
            raise ValueError("Factuality needs expected: the reference answer, a non-empty string")
        self.expected, self.model = expected.strip(), model

    def options(self) -> dict[str, Any]:
        return {"expected": self.expected, **({"model": self.model} if self.model else {})}

    def criteria(self) -> str:
        return (
            "The output is factually consistent with this reference answer: it may add detail, but it "
            f"must not contradict it or leave out its key facts. Reference answer: {self.expected}"
        )

    async def assess(self, ctx: JudgeContext) -> Verdict:
        return await ctx.ask(self.criteria(), model=self.model, claim=self.expected)


# -- conversation judges ------------------------------------------------------------------------
class ConversationGoal(Judge):
    """Over the whole conversation, the agent achieved the user's goal. Without `goal`, on a
    simulated user's conversation it is deterministic: the simulated user's own decision (it passes
    when the user said its goal was reached). With `goal` (or on a scripted conversation) it asks the
    judge model about the whole conversation (`model=` overrides the model)."""

    name = "ConversationGoal"
    uses_model = True

    def __init__(self, goal: str | None = None, *, model: str | None = None, threshold: float | None = None):
        super().__init__(threshold=threshold)
        if goal is not None and (not isinstance(goal, str) or not goal.strip()):
            raise ValueError("ConversationGoal: goal must be a non-empty string (or left out for a simulated user's)")
        self.goal, self.model = goal.strip() if goal else None, model

    def options(self) -> dict[str, Any]:
        return {**({"goal": self.goal} if self.goal else {}), **({"model": self.model} if self.model else {})}

    async def assess(self, ctx: JudgeContext) -> Any:
        run = _needs_run(ctx, self.name)
        conv = run.conversation
        if self.goal is None:
            if conv is None or conv.mode != "simulated":
                raise TypeError(
                    "ConversationGoal() without a goal judges a simulated user's conversation; "
                    "give the goal (ConversationGoal(goal=...)) to judge this run"
                )
            reached = bool(conv.goal_reached)
            at = f" at turn {conv.turns_to_goal} of {len(run.turns)}" if reached else f" ({conv.ended})"
            verb = "reached" if reached else "did not reach"
            return {
                "pass": reached,
                "score": 1.0 if reached else 0.0,
                "reasoning": f"the simulated user {verb} its goal{at}: {conv.goal}",
                "details": {"ended": conv.ended, "turns": len(run.turns), "turns_to_goal": conv.turns_to_goal},
            }
        return await ctx.ask(
            f"Over the whole conversation, the agent achieved the user's goal: {self.goal}",
            model=self.model,
            claim=self.goal,
        )


class TurnsToGoal(Judge):
    """A simulated user reached its goal within `max_turns` turns. Deterministic. Score: 1 within
    the limit, `max_turns / turns` past it, 0 when the goal was never reached; passes at
    `threshold` (default 1.0)."""

    name = "TurnsToGoal"

    def __init__(self, max_turns: int, *, threshold: float | None = None):
        super().__init__(threshold=threshold)
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"TurnsToGoal: max_turns must be a whole number of at least 1, got {max_turns!r}")
        self.max_turns = max_turns

    def options(self) -> dict[str, Any]:
        return {"max_turns": self.max_turns}

    async def assess(self, ctx: JudgeContext) -> dict[str, Any]:
        run = _needs_run(ctx, self.name)
        conv = run.conversation
        if conv is None or conv.mode != "simulated":
            raise TypeError("TurnsToGoal judges a simulated user's conversation (agent.run(user=SimulatedUser(...)))")
        n = conv.turns_to_goal
        if n is None:
            return {
                "score": 0.0,
                "reasoning": f"the goal was never reached ({conv.ended} after {len(run.turns)} turns)",
            }
        score = 1.0 if n <= self.max_turns else self.max_turns / n
        return {"score": round(score, 6), "reasoning": f"the goal was reached at turn {n} (at most {self.max_turns})"}


class RoleAdherence(Judge):
    """In every turn the agent stayed in `role` (never broke character, never acted outside it).
    Asks the judge model about the whole conversation."""

    name = "RoleAdherence"
    uses_model = True

    def __init__(self, role: str, *, model: str | None = None, threshold: float | None = None):
        super().__init__(threshold=threshold)
        if not isinstance(role, str) or not role.strip():
            raise ValueError("RoleAdherence needs role: what the agent is, a non-empty string")
        self.role, self.model = role.strip(), model

    def options(self) -> dict[str, Any]:
        return {"role": self.role, **({"model": self.model} if self.model else {})}

    async def assess(self, ctx: JudgeContext) -> Verdict:
        _needs_run(ctx, self.name)
        return await ctx.ask(
            f"In every turn of the conversation the agent stayed in its role ({self.role}): it never broke "
            "character and never acted outside that role.",
            model=self.model,
            claim=self.role,
        )


class KnowledgeRetention(Judge):
    """The agent kept what the user said in earlier turns: it used those facts, never asked again
    for something already said, and never contradicted it. Asks the judge model (the offline demo
    judge looks for the user's later messages' content words in the last answer)."""

    name = "KnowledgeRetention"
    uses_model = True

    def __init__(self, *, model: str | None = None, threshold: float | None = None):
        super().__init__(threshold=threshold)
        self.model = model

    def options(self) -> dict[str, Any]:
        return {"model": self.model} if self.model else {}

    async def assess(self, ctx: JudgeContext) -> Verdict:
        run = _needs_run(ctx, self.name)
        said = " ".join(t.user for t in run.turns[1:]) or (run.prompt or "")
        return await ctx.ask(
            "The agent kept what the user said in earlier turns: it used those facts in its later answers, "
            "never asked again for something the user had already said, and never contradicted it.",
            model=self.model,
            claim=said,
        )


# -- custom judges ------------------------------------------------------------------------------
class FunctionJudge(Judge):
    """A judge made by `create_judge`: its options are the keyword arguments it was built with."""

    fn: ClassVar[Callable[..., Any]]

    def __init__(self, *, threshold: float | None = None, **options: Any):
        super().__init__(threshold=threshold)
        self._options = options

    def options(self) -> dict[str, Any]:
        return dict(self._options)

    async def assess(self, ctx: JudgeContext) -> Any:
        getters: dict[str, Callable[[], Any]] = {
            "result": lambda: ctx.run or (ctx.subject if ctx.subject is not None else ctx.output),
            "output": lambda: ctx.output,
            "prompt": lambda: ctx.prompt,
            "tool_calls": lambda: ctx.tool_calls,
            "ctx": lambda: ctx,
            "llm": lambda: ctx.llm,  # built only when asked for: its usage becomes the verdict's
            "ask": lambda: ctx.ask,
        }
        for key, value in self._options.items():
            getters[key] = functools.partial(_same, value)
        params = inspect.signature(type(self).fn).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            names = list(getters)
        else:
            missing = [
                n
                for n, p in params.items()
                if n not in getters
                and p.default is inspect.Parameter.empty
                and p.kind is not inspect.Parameter.VAR_POSITIONAL
            ]
            if missing:
                raise TypeError(
                    f"judge {self.judge_name!r}: parameters {missing} are not given; pass them as options "
                    f"({self.judge_name}({missing[0]}=...)) or take some of {sorted(getters)}"
                )
            names = [n for n in params if n in getters]
        kwargs = {n: getters[n]() for n in names}
        return await call(type(self).fn, **kwargs)


def _same(value: Any) -> Any:
    return value


def create_judge(name: str, fn: Callable[..., Any]) -> type[FunctionJudge]:
    """A custom judge class named `name` from `fn`: `RefundJudge = create_judge("RefundJudge", fn)`,
    then `judge(result, RefundJudge(expected_tools=[...]))`.

    `fn` takes, by name, any of `result`, `output`, `prompt`, `tool_calls` (`[{"name", "args"}]`),
    `llm`, `ask` (ask the judge model a criteria), `ctx`, and the options the judge was built with;
    it returns what `Judge.assess` may return."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError("create_judge() needs a name: a non-empty string")
    if not callable(fn):
        raise TypeError(f"create_judge({name!r}, fn): fn must be callable, got {type(fn).__name__}")
    return type(name, (FunctionJudge,), {"name": name, "fn": staticmethod(fn), "__doc__": fn.__doc__})


__all__ = [
    "ConversationGoal",
    "Factuality",
    "FunctionJudge",
    "Judge",
    "JudgeContext",
    "KnowledgeRetention",
    "RoleAdherence",
    "StructuredOutputJudge",
    "ToolCallJudge",
    "TurnsToGoal",
    "as_judge",
    "create_judge",
    "run_judge",
]
