"""Entry point of the code location (loaded by workspace.yaml): `defs`."""

from definitions.defs.build import build_definitions

defs = build_definitions()
