"""What the loader returns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_health.errors import EvalFileError
from agent_health.loader.registry import FileRegistry, FixtureDef, Scope, TestSpec
from agent_health.model import TestCase
from agent_health.model.case import CASE_REST, compact_case, data_case

_RUN = object()  # marks the keys of `shared` that hold the tests' (scope, fixtures, suite_judges)


@dataclass(slots=True)
class LoadedTest:
    """A discovered test: its serializable case plus what the engine needs to run it.

    Slotted, with a compact case (`agent_health.model.case.compact_case`), and without a TestSpec
    of its own: the spec's options are the case's, so `spec` is built from the case and what only
    the spec knows (body, scope, extra fixtures, whether suite judges run) when the engine asks
    for it; the last three are one tuple for the tests that share them. A suite of 50,000 tests
    keeps no 50,000 specs."""

    case: TestCase
    registry: FileRegistry
    body: Callable[..., Any]
    run: tuple[Scope, Mapping[str, FixtureDef], bool]  # scope, fixtures, suite_judges

    @classmethod
    def of(
        cls, case: TestCase, spec: TestSpec, registry: FileRegistry, shared: dict[Any, Any] | None = None
    ) -> LoadedTest:
        """The loaded test of `case` and `spec`; `shared`: one dict for the tests of a file, whose
        equal texts and tuples they share."""
        run = (spec.scope, spec.fixtures, spec.suite_judges)
        if shared is not None:
            run = shared.setdefault((_RUN, id(spec.scope), id(spec.fixtures), spec.suite_judges), run)
        return cls(compact_case(case, shared), registry, spec.body, run)

    @property
    def id(self) -> str:
        return self.case.id

    @property
    def epochs(self) -> int | None:
        """The case's own number of epochs (None: the run's)."""
        return self.case.epochs

    @property
    def scope(self) -> Scope:
        return self.run[0]

    @property
    def fixtures(self) -> Mapping[str, FixtureDef]:
        return self.run[1]

    @property
    def suite_judges(self) -> bool:
        return self.run[2]

    def suite_judge_list(self) -> list[Any]:
        """The suite judges that run on this test, outermost scope first (`TestSpec.suite_judge_list`)."""
        return [j for scope in self.scope.chain() for j in scope.judges] if self.suite_judges else []

    @property
    def spec(self) -> TestSpec:
        """The test's spec: its body, scope and fixtures, with the case's options."""
        c = self.case
        return TestSpec(
            name=c.name,
            body=self.body,
            scope=self.scope,
            line=c.line,
            prompt=c.prompt,
            labels=c.labels,
            description=c.description,
            context=c.context,
            timeout_s=c.timeout_s,
            expected_outcomes=c.expected_outcomes,
            expected_trajectory=c.expected_trajectory,
            skip_judge=c.skip_judge,
            epochs=c.epochs,
            max_cost_usd=c.max_cost_usd,
            fixtures=self.fixtures,
            suite_judges=self.suite_judges,
        )


_EPOCHS = CASE_REST.index("epochs")


class LoadedDataTest(LoadedTest):
    """A data case's loaded test: its own id, name, line and content hash, its prompt, and the rest
    of its case's fields as one tuple (`agent_health.model.case.CASE_REST`) that the cases of a
    file with the same values share; its TestCase is made each time `case` is read (about a
    microsecond: the engine reads it once a test). A suite of 50,000 cases keeps no 50,000
    TestCases, about 270 bytes each, only what differs from case to case."""

    __slots__ = ("_hash", "_id", "_line", "_name", "_prompt", "_rest")

    def __init__(
        self,
        registry: FileRegistry,
        body: Callable[..., Any],
        run: tuple[Scope, Mapping[str, FixtureDef], bool],
        id: str,
        name: str,
        line: int | None,
        content_hash: str,
        prompt: str | None,
        rest: tuple[Any, ...],
    ):
        self.registry, self.body, self.run = registry, body, run
        self._id, self._name, self._line, self._hash, self._prompt, self._rest = (
            id, name, line, content_hash, prompt, rest
        )  # fmt: skip

    @property
    def case(self) -> TestCase:
        return data_case(self._id, self._name, self._line, self._hash, self._prompt, self._rest)

    @case.setter
    def case(self, value: TestCase) -> None:
        raise AttributeError("a data case's TestCase is made from its fields: make a LoadedTest with the new case")

    @property
    def id(self) -> str:
        return self._id

    @property
    def epochs(self) -> int | None:
        return self._rest[_EPOCHS]  # type: ignore[no-any-return]


@dataclass
class LoadResult:
    """Tests found, and files (or tests) that failed to load."""

    tests: list[LoadedTest] = field(default_factory=list)
    errors: list[EvalFileError] = field(default_factory=list)
    root: str = ""
    files: list[str] = field(default_factory=list)

    def suites(self) -> dict[str, list[LoadedTest]]:
        out: dict[str, list[LoadedTest]] = {}
        for t in self.tests:
            out.setdefault(t.case.suite, []).append(t)
        return out
