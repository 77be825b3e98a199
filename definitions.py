"""The repository's Dagster entry file, which `workspace.yaml` loads: agent-health's code location.

It stays out of the wheel, because a top-level `definitions` module would collide with other
projects (pyproject.toml packages only `agent_health*`). An installed package loads
`agent_health_dagster.definitions`, the module this file re-exports. To embed agent-health in
another Dagster project, see `agent_health_dagster.agent_health_definitions` (docs/dagster.md)."""

from agent_health_dagster.definitions import defs

__all__ = ["defs"]
