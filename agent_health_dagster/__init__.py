"""The agent-health Dagster code location. `agent_health_dagster.definitions.defs` is what
`workspace.yaml` loads; `python -m agent_health_dagster.headless` runs the whole pipeline headless.
Importing it has no side effects."""

__all__: list[str] = []  # a code location: Dagster loads `definitions.defs`; nothing to import from here
