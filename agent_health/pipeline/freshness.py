"""Whether stored results are up to date: produced from each test's current definition (content
hash), its agent version's current settings and the current judge settings. What a pipeline shows
downstream of the results (rollups, comparisons, the leaderboard) until the results are rerun.
The rule itself lives in `agent_health.stores.freshness`, shared with `agent-health run --only`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from agent_health.pipeline.gates import Gate
from agent_health.stores import ResultKey, ResultStore
from agent_health.stores.freshness import Current, current_state, out_of_date  # the one staleness rule

__all__ = [
    "UP_TO_DATE",
    "Current",
    "current_state",
    "freshness_description",
    "freshness_gate",
    "out_of_date",
    "out_of_date_results",
]

UP_TO_DATE = "up_to_date"  # the name of the check that says it


def freshness_description(where: str, stale: Mapping[str, Sequence[str]], shown: int = 5) -> str:
    """One line for an up_to_date check: what is out of date and why, or that nothing is."""
    if not stale:
        return f"every result of {where} is from the current test definitions and settings"
    names = ", ".join(f"{t} ({'; '.join(why)})" for t, why in list(stale.items())[:shown])
    more = f" and {len(stale) - shown} more" if len(stale) > shown else ""
    return f"{len(stale)} result(s) of {where} are out of date: {names}{more}; rerun them to bring this up to date"


def out_of_date_results(
    store: ResultStore, suites: Mapping[str, Sequence[str]], current: Current, agents: Iterable[str] | None = None
) -> dict[str, list[str]]:
    """Over `suites` (suite -> its current test ids) and agent versions (default: every version
    `current` has settings for, i.e. the configured ones): "agent version: test id" -> why its
    stored result is out of date. Reads summaries only."""
    out: dict[str, list[str]] = {}
    for agent in current.agent_settings if agents is None else agents:
        for suite, tests in suites.items():
            results = store.get_summaries(ResultKey(agent, suite, t) for t in tests)
            out |= {f"{agent}: {t}": why for t, why in out_of_date(results, current).items()}
    return out


def freshness_gate(where: str, stale: Mapping[str, Sequence[str]]) -> Gate:
    """The up_to_date check of one asset: passes when nothing it reads is out of date; fails as a
    warning otherwise."""
    return Gate(
        name=UP_TO_DATE,
        passed=not stale,
        description=freshness_description(where, stale),
        metadata={"out_of_date": list(stale)[:200]},
        severity="warn",  # out-of-date results are on their way to be rerun
    )
