"""agent-health for Dagster.

- The code location: `agent_health_dagster.definitions.defs` (what `workspace.yaml` loads, through
  the project root's `definitions.py`); `python -m agent_health_dagster.headless` runs the whole
  pipeline headless.
- In a team's own Dagster project: `agent_health_definitions(...)` returns one eval root's
  Definitions, named under a prefix so several merge with the team's own (docs/dagster.md);
  `AgentHealthComponent` does the same from a `dg` project's defs.yaml file.

Importing it has no side effects."""

from agent_health_dagster.component import AgentHealthComponent
from agent_health_dagster.defs.resources import AgentHealthResource
from agent_health_dagster.embed import agent_health_definitions

__all__ = ["AgentHealthComponent", "AgentHealthResource", "agent_health_definitions"]
