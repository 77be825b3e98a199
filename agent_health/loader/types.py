"""What the loader returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_health.errors import EvalFileError
from agent_health.loader.registry import FileRegistry, TestSpec
from agent_health.model import TestCase
from agent_health.model.case import compact_case


@dataclass(slots=True)
class LoadedTest:
    """A discovered test: its serializable case plus what the engine needs to run it (slotted,
    and its case's set of given fields shared: see `agent_health.model.case.compact_case`)."""

    case: TestCase
    spec: TestSpec
    registry: FileRegistry

    def __post_init__(self) -> None:
        self.case = compact_case(self.case)

    @property
    def id(self) -> str:
        return self.case.id


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
