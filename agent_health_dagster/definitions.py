"""Entry point of the code location (loaded by workspace.yaml): `defs`."""

from agent_health_dagster.defs.build import build_definitions

defs = build_definitions()
