"""Dagster's own environment settings that this code location's deployments run with.

Dagster reads these from the environment of its processes, never from dagster.yaml, so the
deployment sets them: `scripts/main.sh` and `scripts/dev.sh` (from `deploy/dagster.env`), the
headless job's entry point, and the run launcher's environment in docs/deploy.md. Nothing sets
them on import. What each one changes, and which process must have it:

- `DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS=1`: a run over N partitions writes one
  "materialization planned" event per asset (carrying the run's partition subset) instead of one
  per asset and partition: 3 events per run instead of 3 x N. Read by the process that *creates*
  the run: the webserver (a run launched from the UI), the daemon (backfills, sensors, schedules,
  declarative automation, retries), the headless job or `dagster asset materialize`. Its caveat
  (Dagster's, `EventLogStorage.supports_partition_subset_in_asset_materialization_planned_events`):
  the asset's partition view no longer derives "in progress" and "failed" partitions from planned
  events, so partitions of a run that is still going, or that crashed, show their previous state
  there; the run, the backfill page (which works from the run's range) and each finished
  partition's outcome metadata still show what happened.
- `DAGSTER_EVENT_BATCH_SIZE=1000`: the materializations one output logs for its partitions are
  written in batches of this many (one INSERT each on PostgreSQL; SQLite writes them one by
  one either way). Read by the process that *writes* the events: the run worker.
- `DAGSTER_GRPC_TIMEOUT_SECONDS=180`: how long a call to a code server waits (Dagster's default is
  60 s), so a busy machine's code server is not given up as unreachable. Read by every process that
  calls a code server: the webserver and the daemon (sensors, schedules, launching queued runs).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

DAGSTER_ENV: dict[str, str] = {
    "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS": "1",
    "DAGSTER_EVENT_BATCH_SIZE": "1000",
    "DAGSTER_GRPC_TIMEOUT_SECONDS": "180",
}


def dagster_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings a deployment process should run with: the project's, except where the
    environment already sets one (the operator's value wins)."""
    current = os.environ if environ is None else environ
    return {name: current.get(name) or value for name, value in DAGSTER_ENV.items()}


def apply_dagster_env(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set the settings in this process's environment (its child processes inherit them), for
    entry points that create and run Dagster runs themselves (the headless job, benchmarks).
    Returns what is in effect."""
    target = os.environ if environ is None else environ
    settings = dagster_env(target)
    target.update(settings)
    return settings
