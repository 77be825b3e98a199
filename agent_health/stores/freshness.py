"""The one staleness rule: whether a stored result is up to date, i.e. produced from its test's
current definition (content hash), its agent version's current settings and the current judge
settings. The Dagster pipeline's `up_to_date` checks (`agent_health.pipeline.freshness`) and
`agent-health run --only changed` both read it from here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent_health.config import Config, JudgeSettings
from agent_health.config.fingerprints import agent_settings_hash, judge_settings_hash
from agent_health.errors import AgentHealthError

if TYPE_CHECKING:  # summaries load when read: a run that only writes never imports them
    from agent_health.stores.summary import ResultSummary

__all__ = ["Current", "current_state", "out_of_date"]


@dataclass(frozen=True)
class Current:
    """What results must have been produced from to be up to date."""

    hashes: Mapping[str, str]  # test id -> content hash of its current definition
    agent_settings: Mapping[str, str] = field(default_factory=dict)  # agent version -> settings hash
    judge_settings: str = ""


def current_state(
    config: Config, tests: Iterable[tuple[str, str]], agents: Iterable[str], judge: JudgeSettings | None = None
) -> Current:
    """The current definitions (test id, content hash) and the settings hashes of `agents` (those
    the configuration no longer knows are left out: their results cannot be rerun). `judge`: a
    run's judge settings (its judge model), else the configuration's."""
    settings = {}
    for agent in agents:
        try:
            settings[agent] = agent_settings_hash(config, agent)
        except AgentHealthError:
            continue
    return Current(dict(tests), settings, judge_settings_hash(config, judge))


def out_of_date(results: Iterable[ResultSummary], current: Current) -> dict[str, list[str]]:
    """Test id -> why its stored result is not up to date (results of tests no longer defined, and
    older results without provenance, are left alone)."""
    out: dict[str, list[str]] = {}
    for r in results:
        why = []
        now = current.hashes.get(r.test_id)
        # prefix match: the pipeline records hashes cut to its data-version length
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
