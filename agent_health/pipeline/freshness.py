"""Whether stored results are up to date: produced from each test's current definition (content
hash), its agent version's current settings and the current judge settings. What a pipeline shows
downstream of the results (rollups, comparisons, the leaderboard) until the results are rerun."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from agent_health.config import Config
from agent_health.config.fingerprints import agent_settings_hash, judge_settings_hash
from agent_health.errors import AgentHealthError
from agent_health.pipeline.gates import Gate
from agent_health.stores import ResultKey, ResultStore, ResultSummary

UP_TO_DATE = "up_to_date"  # the name of the check that says it


@dataclass(frozen=True)
class Current:
    """What results must have been produced from to be up to date."""

    hashes: Mapping[str, str]  # test id -> content hash of its current definition
    agent_settings: Mapping[str, str] = field(default_factory=dict)  # agent version -> settings hash
    judge_settings: str = ""


def current_state(config: Config, tests: Iterable[tuple[str, str]], agents: Iterable[str]) -> Current:
    """The current definitions (test id, content hash) and the settings hashes of `agents` (those
    the configuration no longer knows are left out: their results cannot be rerun)."""
    settings = {}
    for agent in agents:
        try:
            settings[agent] = agent_settings_hash(config, agent)
        except AgentHealthError:
            continue
    return Current(dict(tests), settings, judge_settings_hash(config))


def out_of_date(results: Iterable[ResultSummary], current: Current) -> dict[str, list[str]]:
    """Test id -> why its stored result is not up to date (results of tests no longer defined, and
    older results without provenance, are left alone)."""
    out: dict[str, list[str]] = {}
    for r in results:
        why = []
        now = current.hashes.get(r.test_id)
        if now and r.content_hash and not now.startswith(r.content_hash) and not r.content_hash.startswith(now):
            why.append("test definition changed")
        settings = current.agent_settings.get(r.agent)
        if settings and r.agent_settings_hash and r.agent_settings_hash != settings:
            why.append(f"settings of {r.agent} changed")
        if current.judge_settings and r.judge_settings_hash and r.judge_settings_hash != current.judge_settings:
            why.append("judge settings changed")
        if why:
            out[r.test_id] = why
    return out


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
    """The up_to_date check of one asset: passes when nothing it reads is out of date."""
    return Gate(
        name=UP_TO_DATE,
        passed=not stale,
        description=freshness_description(where, stale),
        metadata={"out_of_date": list(stale)[:200]},
    )
