"""Data versions of what a results partition depends on besides its test: the agent version's
effective settings and the judge settings. A change to either marks that version's results stale.

Secrets never enter a version: settings that reference the environment (`{"env": NAME}`,
`${NAME}`) count by the reference, never the value, and keys that name a credential are left out."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agent_health.config import Config
from agent_health.config.secrets import display_value as _public  # env refs by name, credentials redacted

VERSION_LENGTH = 16


def _digest(payload: Any) -> str:
    blob = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:VERSION_LENGTH]


def judge_settings(config: Config) -> dict[str, Any]:
    """The judge settings that can change a verdict: provider, model, their settings, named
    providers, per-test models, rubric files (by content) and the evaluators' names."""
    judge = config.judge
    rubrics = {}
    for name, path in sorted(judge.rubrics.items()):
        try:
            rubrics[name] = hashlib.sha256(config.path(path).read_bytes()).hexdigest()
        except OSError:
            rubrics[name] = f"missing:{path}"
    return {
        "provider": judge.provider,
        "model": judge.model,
        "settings": _public(judge.settings),
        "providers": _public(judge.providers),
        "per_test": dict(sorted(judge.per_test.items())),
        "rubrics": rubrics,
        "evaluators": sorted(config.evaluators),
        "max_output_chars": judge.max_output_chars,
        "max_step_chars": judge.max_step_chars,
        "max_steps": judge.max_steps,
    }


def agent_version_data_version(config: Config, ref: str) -> str:
    """Data version of one agent version: its connector and effective settings (secrets
    excluded) together with the judge settings. Raises ConfigError for an unknown version."""
    agent = config.agent(ref)
    return _digest(
        {
            "agent": {
                "ref": agent.ref,
                "connector": agent.connector,
                "settings": _public(agent.settings),
                "traces": agent.traces,
            },
            "judge": judge_settings(config),
        }
    )
