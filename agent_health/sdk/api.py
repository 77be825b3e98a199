"""The authoring API: `test`, `describe`, hooks and fixtures."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agent_health.errors import EvalFileError
from agent_health.judges.kit import as_judge
from agent_health.loader.ids import name_problem, shown_name
from agent_health.loader.options import check_options, one_or_many
from agent_health.loader.registry import BUILTIN_FIXTURES, FixtureDef, Scope, TestSpec, active_registry, definition_line
from agent_health.model.case import shared_value, to_context, to_expected_steps


class TestAPI:
    """`@test(name, ...)` registers a test body; `test.extend(name=fixture_fn)` adds fixtures.

    The body may be `async def` or `def`; its parameters name the fixtures it needs. A single
    string (or context item, or step) where a list is expected is one item, never split into
    characters; a timeout <= 0, epochs < 1 or a wrong type is a load error of this test that names
    the option (the file's other tests still load).
    """

    __test__ = False

    def __init__(self, fixtures: Mapping[str, FixtureDef] | None = None):
        self._fixtures = dict(fixtures or {})

    def __call__(
        self,
        name: str | Callable[..., Any],
        *,
        prompt: str | None = None,
        labels: str | Iterable[str] = (),
        description: str | None = None,
        context: Any = (),
        timeout: float | None = None,
        expected_outcomes: str | Iterable[str] = (),
        expected_trajectory: Any = (),
        skip_judge: bool | None = None,
        epochs: int | None = None,
        max_cost_usd: float | None = None,
        suite_judges: bool = True,
    ) -> Any:
        if callable(name):  # bare @test: the function name is the test name
            return self(name.__name__)(name)
        if not isinstance(name, str) or not name.strip():
            raise TypeError("test() needs a non-empty name")

        def register(body: Callable[..., Any]) -> Callable[..., Any]:
            reg = active_registry("test()")
            scope = reg.scope
            full = " > ".join([*scope.title_parts(), name.strip()])
            line = definition_line(body)
            problem = body_problem(body) or name_problem(full)
            if problem:
                reg.errors.append(EvalFileError(reg.path, f"test {shown_name(full)}: {problem}", line))
                return body
            try:  # a bad option is this test's load error; the file's other tests still load
                options = check_options(
                    labels=labels,
                    expected_outcomes=expected_outcomes,
                    timeout=timeout,
                    epochs=epochs,
                    skip_judge=skip_judge,
                    max_cost_usd=max_cost_usd,
                )
                items = to_context(one_or_many(context))
            except ValueError as exc:
                reg.errors.append(EvalFileError(reg.path, f"test {full!r}: {exc}", line))
                return body
            reg.add_test(
                TestSpec(
                    name=full,
                    body=body,
                    scope=scope,
                    line=line,
                    prompt=prompt,
                    # a suite of 50,000 tests made in a loop holds one copy of what they repeat
                    labels=shared_value(options.labels, reg.shared),
                    description=description,
                    context=shared_value(items, reg.shared),
                    timeout_s=options.timeout,
                    expected_outcomes=shared_value(options.expected_outcomes, reg.shared),
                    expected_trajectory=shared_value(to_expected_steps(one_or_many(expected_trajectory)), reg.shared),
                    skip_judge=options.skip_judge,
                    epochs=options.epochs,
                    max_cost_usd=options.max_cost_usd,
                    fixtures=self._fixtures,  # never changed after __init__: shared, not copied
                    suite_judges=bool(suite_judges),
                )
            )
            return body

        return register

    def extend(self, **fixtures: Callable[..., Any]) -> TestAPI:
        """A new `test` whose bodies can also ask for these fixtures (Playwright's test.extend)."""
        merged = dict(self._fixtures)
        for fname, fn in fixtures.items():
            if fname in BUILTIN_FIXTURES:
                raise ValueError(f"test.extend(): {fname!r} is a built-in fixture and cannot be redefined")
            merged[fname] = FixtureDef(fname, fn)
        return TestAPI(merged)


test = TestAPI()


def body_problem(body: Callable[..., Any]) -> str | None:
    """Why `body` cannot be a test body, if it cannot: calling a generator function only makes a
    generator, so its code would never run and the test would pass without running."""
    if inspect.isgeneratorfunction(body) or inspect.isasyncgenfunction(body):
        return (
            "the body is a generator (it contains `yield`), so it would never run; a test body runs "
            "once: remove the `yield` (setup with teardown belongs in a @fixture)"
        )
    return None


class describe(contextlib.ContextDecorator):
    """Group tests: `with describe("checkout"): ...`. Names join with ' > '; hooks apply inside.

    `judges=[...]` (criteria strings or named judges) run on every test inside, after its body,
    each as its own gate signal (`@test(..., suite_judges=False)` opts a test out)."""

    def __init__(self, name: str, *, judges: Iterable[Any] = ()):
        self.name = name
        self.judges = check_judges(judges, f"describe({name!r}, judges=...)")

    def __enter__(self) -> describe:
        reg = active_registry("describe()")
        reg.stack.append(Scope(self.name, parent=reg.scope, judges=list(self.judges)))
        return self

    def __exit__(self, *exc: Any) -> None:
        active_registry("describe()").stack.pop()

    def __call__(self, fn: Callable[..., Any]) -> Any:
        """As a decorator, runs the function at once inside the group."""
        with self:
            fn()
        return fn


def check_judges(judges: Iterable[Any], where: str) -> list[Any]:
    """Suite judges as given, or TypeError naming `where`: each is a criteria string or a named judge."""
    if isinstance(judges, str) or as_judge(judges) is not None:
        judges = [judges]
    out: list[Any] = []
    for j in judges:
        named = as_judge(j)
        if named is None and not (isinstance(j, str) and j.strip()):
            raise TypeError(f"{where}: a suite judge is a criteria string or a named judge, got {j!r}")
        out.append(named or j.strip())
    return out


def use_judges(*judges: Any) -> None:
    """Suite judges for the current file (or `describe` block): each runs on every test in it after
    its body, as its own gate signal. A test opts out with `@test(..., suite_judges=False)`."""
    active_registry("use_judges()").scope.judges.extend(check_judges(judges, "use_judges()"))


def _hook(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        active_registry(f"{kind}()").scope.hooks[kind].append(fn)
        return fn

    decorator.__name__ = kind
    decorator.__doc__ = f"Register a {kind.replace('_', ' ')} hook in the current file or describe() scope."
    return decorator


before_all = _hook("before_all")
after_all = _hook("after_all")
before_each = _hook("before_each")
after_each = _hook("after_each")


def fixture(fn: Callable[..., Any] | None = None, *, name: str | None = None) -> Any:
    """Declare a file fixture, injected by parameter name. `yield` once to get teardown."""

    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        fname = name or f.__name__
        if fname in BUILTIN_FIXTURES:
            raise ValueError(f"fixture {fname!r} is built in and cannot be redefined")
        active_registry("fixture()").fixtures[fname] = FixtureDef(fname, f)
        return f

    return register(fn) if fn is not None else register
