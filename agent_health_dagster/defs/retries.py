"""The retry of a failed run that Dagster's run retries decided on and then missed.

`run_retries` in dagster.yaml marks a failed run that it will retry (tag `dagster/will_retry=true`)
when the failure is stored; its daemon then reads failure events every 5 s and retries those runs.
The daemon reads the run of a new failure event and skips it when the run is not yet FAILURE: the
failure event is written a moment before the run's status (two statements, two connections on
PostgreSQL), so a failure read in between is never retried, though marked so. That happened to one
of the two runs that run monitoring failed at their maximum runtime in
tests/deploy/test_celery_route.py (Dagster 1.13.27). This sensor retries such a run once: a run of
the project's jobs marked `will_retry=true` that has no retry (`dagster/auto_retry_run_id`) some
time after it failed is requested again, over the same partitions, tagged
`agent_health/retry_of=<run id>`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from dagster import (
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)

WILL_RETRY = "dagster/will_retry"
AUTO_RETRY_RUN_ID = "dagster/auto_retry_run_id"
RETRY_OF = "agent_health/retry_of"
# Dagster's run retries act within seconds of a failure (its daemon reads failures every 5 s): a
# run still without a retry this long after it failed was missed.
MISSED_AFTER_S = 30
LOOK_BACK_S = 86_400
# The tags of a run that say which partitions it covers. Not Dagster's per-dimension copies of a
# multi-partition key (`dagster/partition/agent`): Dagster derives them, and warns that a key with
# two slashes given to a run request will be refused.
PARTITION_TAGS = (
    "dagster/partition",
    "dagster/asset_partition_range_start",
    "dagster/asset_partition_range_end",
)


def missed_retry_request(run: Any, end_time: float | None, now: float, jobs: set[str]) -> RunRequest | None:
    """The run request that retries `run`, when Dagster's run retries marked it for a retry they
    did not start (and it is a run of one of `jobs`, not itself such a retry)."""
    tags = run.tags
    if run.job_name not in jobs or tags.get(WILL_RETRY) != "true" or AUTO_RETRY_RUN_ID in tags or RETRY_OF in tags:
        return None
    if end_time is None or now - end_time < MISSED_AFTER_S:
        return None
    kept = {k: v for k, v in tags.items() if k in PARTITION_TAGS or k.startswith("agent_health/")}
    return RunRequest(
        run_key=f"retry-of:{run.run_id}",
        job_name=run.job_name,
        tags={**kept, RETRY_OF: run.run_id},
    )


def build_missed_retry_sensor(jobs: Sequence[Any], interval: int, name: str = "missed_retries_sensor") -> Any:
    """The sensor that retries the failed runs of `jobs` that Dagster's run retries missed."""
    names = {job.name for job in jobs}

    @sensor(
        name=name,
        jobs=list(jobs),
        minimum_interval_seconds=interval,
        default_status=DefaultSensorStatus.RUNNING,
        description="Retries a failed evaluation or refresh run that Dagster's run retries marked for a retry "
        f"(dagster/will_retry=true) but did not start within {MISSED_AFTER_S} s; tags the retry {RETRY_OF}.",
    )
    def missed_retries_sensor(context: SensorEvaluationContext) -> list[RunRequest] | SkipReason:
        now = time.time()
        records = context.instance.get_run_records(
            RunsFilter(
                statuses=[DagsterRunStatus.FAILURE],
                tags={WILL_RETRY: "true"},
                updated_after=datetime.fromtimestamp(now - LOOK_BACK_S, UTC),
            ),
            limit=500,
        )
        requests = [
            request
            for record in records
            if (request := missed_retry_request(record.dagster_run, record.end_time, now, names)) is not None
        ]
        return requests or SkipReason("no failed run without the retry Dagster's run retries decided on")

    return missed_retries_sensor
