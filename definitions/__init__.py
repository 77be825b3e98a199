"""The agent-health Dagster code location. `definitions.definitions.defs` is what
`workspace.yaml` loads; `python -m definitions.headless` runs the whole pipeline headless.
Importing it has no side effects."""
