"""The result store interface. Local files are the default; S3 and OpenSearch stores implement
the same methods (a key maps naturally onto an object key or a document id).

A store keeps two things: the latest result per (agent version, suite, test), which rollups,
comparisons and Dagster read; and the history of evaluation runs, each a manifest (`EvalRun`)
plus every result it produced, so a run can be reported, compared or re-judged by its id.
"""

from __future__ import annotations

import abc
import builtins
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from agent_health.errors import StoreError
from agent_health.lazy import deferred
from agent_health.model import EvalRun, TestResult

# summaries (what rollups read) load on the first read of them, never in a run that only writes
if TYPE_CHECKING:
    import agent_health.stores.summary as summary
    from agent_health.model.calibration import Calibration, Label
else:
    summary = deferred("agent_health.stores.summary")


__all__ = ["ResultKey", "ResultStore", "StoreError", "newest_labels"]

_log = logging.getLogger("agent_health.stores")
_skipped_runs: set[str] = set()  # damaged run manifests already warned about (once per process)


def skip_unreadable_run(where: str, why: str) -> None:
    """A run whose manifest cannot be read (torn, empty, not a run) is left out of a listing of
    runs, so one damaged run never hides the others; said once per process, naming the manifest
    (`where`: its path, object or document) and `why`."""
    if where in _skipped_runs:
        return
    _skipped_runs.add(where)
    _log.warning("warning: run manifest %s cannot be read (%s); that run is skipped", where, why)


def newest_labels(labels: Iterable[Label]) -> builtins.list[Label]:
    """Labels in storing order reduced to the newest of each (result, claim, judge, labeller)."""
    newest: dict[tuple[object, ...], Label] = {}
    for label in labels:
        newest.pop(label.key, None)  # the newer goes last, as if written in the older's place
        newest[label.key] = label
    return builtins.list(newest.values())


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

    #: How a run's result sink hands this store its batches: 0, each `put_many` on the sink's own
    #: thread, between reports (a local disk: a hand-off to a writer thread cost more CPU than the
    #: write itself); N > 0, up to N `put_many` calls in flight on writer threads, so a store that
    #: waits on a network keeps writing while the sink reports.
    concurrent_writes: ClassVar[int] = 2

    @abc.abstractmethod
    def put(self, result: TestResult) -> ResultKey:
        """Store `result` under its own key, replacing any previous result there; when it has an
        `eval_run_id`, also add it to that run's results (kept when later runs replace it)."""

    def put_many(self, results: Iterable[TestResult]) -> builtins.list[ResultKey]:
        """Store many results (as `put` does each); stores override it with a bulk write."""
        return [self.put(r) for r in results]

    @abc.abstractmethod
    def put_run(self, run: EvalRun) -> None:
        """Write (or rewrite) the manifest of an evaluation run."""

    @abc.abstractmethod
    def get_run(self, run_id: str) -> EvalRun | None:
        """The manifest of one run, or None."""

    @abc.abstractmethod
    def list_runs(self) -> builtins.list[EvalRun]:
        """Every run's manifest, newest first; a run whose manifest cannot be read is left out,
        with one warning naming it (`skip_unreadable_run`)."""

    @abc.abstractmethod
    def run_results(self, run_id: str) -> Iterator[TestResult]:
        """The results one run stored, in the order it stored them (a result stored twice in one
        run counts once, the last time). Streams: memory stays flat in the number of results."""

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

    def get_summaries(self, keys: Iterable[ResultKey]) -> Iterator[summary.ResultSummary]:
        """Summaries (what rollups and comparisons read) for `keys` that exist, in order."""
        for result in self.get_many(keys):
            yield summary.ResultSummary.of(result)

    # -- calibration: human labels and judge calibrations, kept beside the results ---------------
    def put_labels(self, labels: Iterable[Label]) -> int:
        """Add human labels (a newer label of the same result, claim, judge and labeller wins on
        reading; the older stays stored). Stores that keep no labels say so."""
        raise StoreError(f"result store {self.location} does not keep labels yet; use a local store")

    def labels(self) -> builtins.list[Label]:
        """Every stored label, the newest of each (result, claim, judge, labeller)."""
        return []

    def put_calibrations(self, calibrations: Iterable[Calibration]) -> None:
        """Add judge calibrations (the newest per judge is the one gates read)."""
        raise StoreError(f"result store {self.location} does not keep calibrations yet; use a local store")

    def calibrations(self) -> builtins.list[Calibration]:
        """Every stored calibration, oldest first (none: no judge was calibrated here)."""
        return []

    def load(self, agent: str | None = None, suite: str | None = None) -> builtins.list[TestResult]:
        """Every stored result of one agent version and/or suite."""
        return list(self.get_many(self.list(agent, suite)))
