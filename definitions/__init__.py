"""The agent-health Dagster code location. `definitions.definitions.defs` is what
`workspace.yaml` loads; `python -m definitions.headless` runs the whole pipeline headless."""

import os

# Let Dagster hand a run's per-partition asset events to the event log in batches: the pooled
# SQLite event log (definitions/storage.py) writes a batch in one transaction; other storages
# store it event by event as before. Set here so every process that loads the code location
# (run workers included) gets it; an explicit value in the environment wins.
os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", "1000")
