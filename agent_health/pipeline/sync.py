"""Keeping one suite's test partitions in step with its eval file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agent_health.loader import LoadResult


@dataclass
class SuiteSync:
    """What changed in one suite since the partitions were last synced."""

    suite: str
    add: list[str] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    hashes: dict[str, str] = field(default_factory=dict)  # current test id -> content hash
    error: str | None = None

    @property
    def dirty(self) -> list[str]:
        """Tests whose results are missing or stale: added or changed, in file order."""
        return [t for t in self.hashes if t in set(self.add) | set(self.changed)]


def plan_suite_sync(
    suite: str,
    loaded: LoadResult | None,
    current: Sequence[str],
    known_hashes: Mapping[str, str],
    load_error: str | None = None,
    hash_length: int | None = None,
) -> SuiteSync:
    """Compare the loaded tests with the current partitions and the hashes seen last time.

    A file that failed to load (`load_error`, or errors and no tests) keeps its partitions: the
    plan then only carries the error, so a typo never wipes a suite's history."""
    if load_error is not None or loaded is None or (loaded.errors and not loaded.tests):
        error = load_error or (str(loaded.errors[0]) if loaded and loaded.errors else f"{suite}: not loaded")
        return SuiteSync(suite=suite, hashes={t: known_hashes[t] for t in current if t in known_hashes}, error=error)
    hashes = {t.id: t.case.content_hash[:hash_length] for t in loaded.tests if t.case.suite == suite}
    have = set(current)
    plan = SuiteSync(suite=suite, hashes=hashes)
    plan.add = [t for t in hashes if t not in have]
    plan.remove = [t for t in current if t not in hashes]
    plan.changed = [t for t, h in hashes.items() if t in have and t in known_hashes and known_hashes[t] != h]
    if loaded.errors:  # some tests failed to load: report, and keep their partitions
        plan.error = "; ".join(str(e) for e in loaded.errors[:5])
        plan.remove = []
    return plan
