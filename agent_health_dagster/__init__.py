"""agent-health for Dagster.

- The code location: `agent_health_dagster.definitions.defs` (what `workspace.yaml` loads, through
  the project root's `definitions.py`); `python -m agent_health_dagster.headless` runs the whole
  pipeline headless.
- In a team's own Dagster project: `agent_health_definitions(...)` returns one eval root's
  Definitions, named under a prefix so several merge with the team's own (docs/dagster.md);
  `AgentHealthComponent` does the same from a `dg` project's defs.yaml file; `AgentHealthResource`
  holds agent-health's settings.

Importing it has no side effects and imports nothing else: each public name is imported when first
used, so a submodule (`dagster_env`, `celery_worker`) does not pay for Dagster's import."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_health_dagster.component import AgentHealthComponent
    from agent_health_dagster.defs.resources import AgentHealthResource
    from agent_health_dagster.embed import agent_health_definitions

_LAZY = {
    "AgentHealthComponent": "agent_health_dagster.component",
    "AgentHealthResource": "agent_health_dagster.defs.resources",
    "agent_health_definitions": "agent_health_dagster.embed",
}

__all__ = ["AgentHealthComponent", "AgentHealthResource", "agent_health_definitions"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
