"""Reading what a Dagster run wrote to the event log (for the bookkeeping tests). Not `events.py`:
that name would shadow the `events` package opensearch-py imports (pytest puts this folder on sys.path)."""

from __future__ import annotations

from typing import Any

from dagster import DagsterEventType

from agent_health_dagster.defs.suite_assets import worker_settings_message


def planned_events(instance: Any, run_id: str) -> list[tuple[Any, str | None, int]]:
    """The run's "materialization planned" events as (asset key, partition, partitions in the
    event's subset): per partition (key, partition, 0), or per asset (key, None, N)."""
    out = []
    for record in instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION_PLANNED).records:
        data = record.event_log_entry.dagster_event.event_specific_data
        subset = data.partitions_subset
        out.append((data.asset_key, data.partition, len(list(subset.get_partition_keys())) if subset else 0))
    return out


def worker_settings(instance: Any, run_id: str) -> list[str]:
    """The run worker's log lines naming the Dagster settings it wrote its events with."""
    prefix = worker_settings_message().split(":", 1)[0]
    return [e.message for e in instance.all_logs(run_id) if e.message and e.message.startswith(prefix)]
