"""Per-file registries. The loader activates one while it imports an eval file, so loading two
files, or one file twice, never mixes or duplicates tests."""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from agent_health.errors import EvalFileError, UsageError
from agent_health.model import ContextItem, ExpectedStep

HOOK_KINDS = ("before_all", "after_all", "before_each", "after_each")
BUILTIN_FIXTURES = ("agent", "expect", "judge", "test_info")


@dataclass(eq=False)
class Scope:
    """A file or describe() block: a name, the hooks declared in it, and its suite judges (criteria
    or named judges run on every test inside, after the body)."""

    name: str | None
    parent: Scope | None = None
    hooks: dict[str, list[Callable[..., Any]]] = field(default_factory=lambda: {k: [] for k in HOOK_KINDS})
    judges: list[Any] = field(default_factory=list)

    def chain(self) -> tuple[Scope, ...]:
        """Outermost first (made once: a scope's parent never changes, and the engine asks for
        its test's chain several times per test)."""
        return self._chain

    @functools.cached_property
    def _chain(self) -> tuple[Scope, ...]:
        out: list[Scope] = []
        s: Scope | None = self
        while s is not None:
            out.append(s)
            s = s.parent
        return tuple(reversed(out))

    def title_parts(self) -> list[str]:
        return [s.name for s in self.chain() if s.name]


@dataclass
class FixtureDef:
    name: str
    fn: Callable[..., Any]


NO_FIXTURES: Mapping[str, FixtureDef] = MappingProxyType({})


@dataclass(slots=True)
class TestSpec:
    """A registered test body with its options, scope and extra fixtures (slotted: a suite of
    50,000 tests holds 50,000 of them)."""

    __test__ = False

    name: str
    body: Callable[..., Any]
    scope: Scope
    line: int | None
    prompt: str | None = None
    labels: tuple[str, ...] = ()
    description: str | None = None
    context: tuple[ContextItem, ...] = ()
    turns: tuple[str, ...] = ()  # a data case's conversation: the user's next messages
    user: Any = None  # or its simulated user (a SimulatedUser)
    timeout_s: float | None = None
    expected_outcomes: tuple[str, ...] = ()
    expected_trajectory: tuple[ExpectedStep, ...] = ()
    skip_judge: bool | None = None
    epochs: int | None = None
    max_cost_usd: float | None = None
    # read only (the loader and the engine never change it): the shared NO_FIXTURES by default
    fixtures: Mapping[str, FixtureDef] = field(default_factory=lambda: NO_FIXTURES)
    suite_judges: bool = True  # False: the suite judges of its file and describe blocks skip this test

    def suite_judge_list(self) -> list[Any]:
        """The suite judges that run on this test, outermost scope first (none when it opted out)."""
        return [j for scope in self.scope.chain() for j in scope.judges] if self.suite_judges else []


@dataclass
class FileRegistry:
    """Everything one eval file declared."""

    path: str
    tests: list[TestSpec] = field(default_factory=list)
    fixtures: dict[str, FixtureDef] = field(default_factory=dict)
    root: Scope = field(default_factory=lambda: Scope(None))
    stack: list[Scope] = field(default_factory=list)
    errors: list[EvalFileError] = field(default_factory=list)
    lines: dict[str, int | None] = field(default_factory=dict)  # test name -> its line, to find duplicates at once
    # equal labels, prompts and steps of the file's tests, one copy each (`shared_value`), while it loads
    shared: dict[Any, Any] = field(default_factory=dict)

    @property
    def scope(self) -> Scope:
        return self.stack[-1] if self.stack else self.root

    def add_test(self, spec: TestSpec) -> None:
        if spec.name in self.lines:
            first = self.lines[spec.name]
            self.errors.append(
                EvalFileError(
                    self.path, f"duplicate test name {spec.name!r} (first defined on line {first})", spec.line
                )
            )
            return
        self.lines[spec.name] = spec.line
        self.tests.append(spec)


_active: ContextVar[FileRegistry | None] = ContextVar("agent_health_file_registry", default=None)


def active_registry(what: str) -> FileRegistry:
    reg = _active.get()
    if reg is None:
        raise UsageError(
            f"{what} must be declared in an eval file loaded by agent-health "
            "(agent-health run FILE, or agent_health.load_tests)"
        )
    return reg


def activate(reg: FileRegistry | None) -> Token[FileRegistry | None]:
    return _active.set(reg)


def deactivate(token: Token[FileRegistry | None]) -> None:
    _active.reset(token)


def definition_line(fn: Callable[..., Any]) -> int | None:
    """First line of the definition (the decorator line); cheap, no source parsing."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return code.co_firstlineno if code else None


def parameters(fn: Callable[..., Any]) -> tuple[str, ...]:
    """Names a fixture, hook or body asks for (cached: the engine asks once per test).

    A plain function's names come from its code object, cached per code object: the tests one
    loop defines share one code object, and inspect.signature would leave an `__annotations__`
    dict on every function it looks at."""
    if type(fn) is types.FunctionType and not hasattr(fn, "__wrapped__") and not hasattr(fn, "__signature__"):
        return _code_parameters(fn.__code__)
    return _signature_parameters(fn)


@functools.lru_cache(maxsize=1024)
def _code_parameters(code: types.CodeType) -> tuple[str, ...]:
    # positional-or-keyword names, then keyword-only ones: what inspect.signature lists for a plain
    # function (positional-only names and *args / **kwargs are never fixtures)
    first = code.co_posonlyargcount
    return code.co_varnames[first : code.co_argcount + code.co_kwonlyargcount]


@functools.lru_cache(maxsize=1024)
def _signature_parameters(fn: Callable[..., Any]) -> tuple[str, ...]:
    return tuple(
        p.name for p in inspect.signature(fn).parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )
