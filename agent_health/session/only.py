"""`--only missing|failed|changed`: of the selected tests, those that need a run by the stored
results of each agent version. How a budget-stopped run resumes, and pytest's `--lf`.

"changed" is the staleness rule the Dagster pipeline uses (`agent_health.stores.freshness`): a
stored result whose test definition (content hash), agent version settings or judge settings
differ from the current ones. A stored result without provenance counts as up to date there too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agent_health.config import Config, JudgeSettings
from agent_health.errors import ConfigError
from agent_health.loader.types import LoadedTest
from agent_health.model import ONLY_RULES
from agent_health.stores.base import ResultKey, ResultStore
from agent_health.stores.freshness import current_state, out_of_date

__all__ = ["NO_STORE_FOR_ONLY", "tests_needing_a_run"]

NO_STORE_FOR_ONLY = (
    "--only {rules} compares with the stored results, but this run stores nothing (--no-store or "
    "AGENT_HEALTH_STORE=none); configure a store or drop --only"
)


def tests_needing_a_run(
    plan: Mapping[str, Sequence[LoadedTest]],
    store: ResultStore,
    config: Config,
    only: Sequence[str],
    judge: JudgeSettings | None = None,
) -> tuple[dict[str, list[LoadedTest]], dict[str, int]]:
    """Per agent version, the tests of `plan` that any rule of `only` selects (a union), in their
    order, and how many were left out as up to date. `judge` is the run's judge settings (its
    judge model included), so a result judged by another model counts as changed. Reads
    summaries only."""
    unknown = [rule for rule in only if rule not in ONLY_RULES]
    if unknown:
        raise ConfigError(f"only: unknown {unknown[0]!r}; use {', '.join(ONLY_RULES)}")
    hashes = {t.id: t.case.content_hash for tests in plan.values() for t in tests}
    current = current_state(config, hashes.items(), plan, judge)
    kept: dict[str, list[LoadedTest]] = {}
    skipped: dict[str, int] = {}
    for agent, tests in plan.items():
        keys = [ResultKey(agent, t.case.suite, t.id) for t in tests]
        stored = {ResultKey(s.agent, s.suite, s.test_id): s for s in store.get_summaries(keys)}
        changed = set(out_of_date(stored.values(), current)) if "changed" in only else set()
        chosen = []
        for key, test in zip(keys, tests):
            summary = stored.get(key)
            if (
                ("missing" in only and summary is None)
                or ("failed" in only and summary is not None and summary.status != "passed")
                or (summary is not None and test.id in changed)
            ):
                chosen.append(test)
        kept[agent] = chosen
        skipped[agent] = len(tests) - len(chosen)
    return kept, skipped
