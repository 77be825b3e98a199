"""The result store interface. Local files are the default; S3 and OpenSearch stores implement
the same five methods (a key maps naturally onto an object key or a document id)."""

from __future__ import annotations

import abc
import builtins
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from agent_health.errors import AgentHealthError
from agent_health.model import TestResult
from agent_health.stores.summary import ResultSummary


class StoreError(AgentHealthError):
    """A result store cannot read or write; the message names the store location and the key."""


@dataclass(frozen=True, order=True)
class ResultKey:
    """Where one result lives: agent version (KEY@VERSION), suite, and test id."""

    agent: str
    suite: str
    test_id: str

    @classmethod
    def of(cls, result: TestResult) -> ResultKey:
        return cls(result.agent, result.suite, result.test_id)


class ResultStore(abc.ABC):
    """Stores one `TestResult` per `ResultKey`. `put` replaces atomically: a reader sees the old
    result or the new one, never a torn write, and a crash loses nothing already put."""

    @abc.abstractmethod
    def put(self, result: TestResult) -> ResultKey:
        """Store `result` under its own key, replacing any previous result there."""

    @abc.abstractmethod
    def get(self, key: ResultKey) -> TestResult | None:
        """The stored result, or None when there is none."""

    @abc.abstractmethod
    def list(self, agent: str | None = None, suite: str | None = None) -> list[ResultKey]:
        """Keys of stored results, optionally only one agent version and/or one suite; sorted."""

    @abc.abstractmethod
    def delete(self, key: ResultKey) -> bool:
        """Remove one result; True when something was removed."""

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Human-readable location for messages and UI metadata (never contains secrets)."""

    def get_many(self, keys: Iterable[ResultKey]) -> Iterator[TestResult]:
        """Results for `keys` that exist, in order (stores may override to batch reads)."""
        for key in keys:
            result = self.get(key)
            if result is not None:
                yield result

    def get_summaries(self, keys: Iterable[ResultKey]) -> Iterator[ResultSummary]:
        """Summaries (what rollups and comparisons read) for `keys` that exist, in order."""
        for result in self.get_many(keys):
            yield ResultSummary.of(result)

    def load(self, agent: str | None = None, suite: str | None = None) -> builtins.list[TestResult]:
        """Every stored result of one agent version and/or suite."""
        return list(self.get_many(self.list(agent, suite)))
