"""Hashes of what a result depends on besides its test: an agent version's effective settings and
the judge settings. Results record them as provenance; the Dagster pipeline uses them as the data
version of `agents/settings` (a change to either marks that version's results stale).

Secrets never enter a hash: settings that reference the environment (`{"env": NAME}`, `${NAME}`)
count by the reference, never the value, and keys that name a credential are left out."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel

from agent_health.config.model import Config, JudgeSettings, verdict_fields
from agent_health.config.secrets import display_value as _public  # env refs by name, credentials redacted
from agent_health.model.agent import ResolvedAgent

VERSION_LENGTH = 16


def digest(payload: Any) -> str:
    """A short, stable sha256 of a JSON-like value (keys sorted)."""
    blob = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:VERSION_LENGTH]


def judge_settings(config: Config, judge: JudgeSettings | None = None) -> dict[str, Any]:
    """The judge settings that can change a verdict: every field of `JudgeSettings` except those
    declared operational there (concurrency, caching, retries), with rubric files counted by
    content, provider settings without secrets, and the evaluators' names. `judge`: a run's judge
    settings (its judge model), else the configuration's."""
    judge = judge or config.judge
    values: dict[str, Any] = {}
    for name in verdict_fields(JudgeSettings):
        value = getattr(judge, name)
        if name == "rubrics":
            value = {rubric: _file_digest(config, path) for rubric, path in sorted(value.items())}
        elif name in ("settings", "providers"):
            value = _public(value)
        elif isinstance(value, BaseModel):  # a nested settings model (judge.calibration): by its fields
            value = value.model_dump(mode="json")
        values[name] = value
    values["evaluators"] = sorted(config.evaluators)
    return values


def _file_digest(config: Config, path: str) -> str:
    try:
        return hashlib.sha256(config.path(path).read_bytes()).hexdigest()
    except OSError:
        return f"missing:{path}"


def agent_settings(config: Config, ref: str | ResolvedAgent) -> dict[str, Any]:
    """One agent version as it runs (KEY@VERSION, or as a run resolved it): connector, effective
    settings (secrets excluded), traces. Raises ConfigError for an unknown version."""
    agent = config.agent(ref) if isinstance(ref, str) else ref
    return {
        "ref": agent.ref,
        "connector": agent.connector,
        "settings": _public(agent.settings),
        "traces": agent.traces,
    }


def agent_settings_hash(config: Config, ref: str | ResolvedAgent) -> str:
    """Hash of one agent version's effective settings (secrets excluded), without the judge's."""
    return digest(agent_settings(config, ref))


def judge_settings_hash(config: Config, judge: JudgeSettings | None = None) -> str:
    """Hash of the judge settings (`judge_settings`)."""
    return digest(judge_settings(config, judge))


def agent_version_data_version(config: Config, ref: str) -> str:
    """Data version of one agent version: its connector and effective settings (secrets
    excluded) together with the judge settings. Raises ConfigError for an unknown version."""
    return digest({"agent": agent_settings(config, ref), "judge": judge_settings(config)})
