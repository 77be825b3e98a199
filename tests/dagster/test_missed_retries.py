"""The sensor that retries a failed run Dagster's run retries marked for a retry and did not start
(agent_health_dagster/defs/retries.py; the live case is tests/deploy/test_celery_route.py)."""

from __future__ import annotations

from dagster import DagsterRun

from agent_health_dagster.defs.retries import MISSED_AFTER_S, missed_retry_request

JOBS = {"evaluate__rca", "refresh"}
RANGE = {
    "dagster/asset_partition_range_start": "demo@v1|a",
    "dagster/asset_partition_range_end": "demo@v1|b",
}


def run(job: str = "evaluate__rca", **tags: str) -> DagsterRun:
    return DagsterRun(job_name=job, run_id="r1", tags={**RANGE, "agent_health/reason": "new agent version", **tags})


def test_a_marked_run_without_its_retry_is_requested_again_over_the_same_partitions():
    request = missed_retry_request(run(**{"dagster/will_retry": "true"}), 1000.0, 1000.0 + MISSED_AFTER_S, JOBS)
    assert request is not None and request.job_name == "evaluate__rca" and request.run_key == "retry-of:r1"
    assert request.tags == {**RANGE, "agent_health/reason": "new agent version", "agent_health/retry_of": "r1"}


def test_no_retry_for_a_run_dagster_retried_one_it_would_not_retry_or_a_recent_failure():
    now = 1000.0 + MISSED_AFTER_S
    marked = {"dagster/will_retry": "true"}
    assert missed_retry_request(run(**marked, **{"dagster/auto_retry_run_id": "r2"}), 1000.0, now, JOBS) is None
    assert missed_retry_request(run(**{"dagster/will_retry": "false"}), 1000.0, now, JOBS) is None
    assert missed_retry_request(run(), 1000.0, now, JOBS) is None
    assert missed_retry_request(run(**marked), now - 1, now, JOBS) is None  # Dagster's daemon still may
    assert missed_retry_request(run(**marked, **{"agent_health/retry_of": "r0"}), 1000.0, now, JOBS) is None
    assert missed_retry_request(run("__ASSET_JOB", **marked), 1000.0, now, JOBS) is None


def test_a_retry_of_a_one_partition_run_keeps_its_key_and_leaves_dagsters_dimension_tags_to_dagster():
    """A run of one test of one version carries Dagster's copies of the key per dimension; a run
    request given them is warned about (tag keys with two slashes are to be refused)."""
    one = {"dagster/partition": "demo@v2|t", "dagster/partition/agent": "demo@v2", "dagster/partition/test": "t"}
    marked = DagsterRun(job_name="evaluate__rca", run_id="r1", tags={**one, "dagster/will_retry": "true"})
    request = missed_retry_request(marked, 1000.0, 1000.0 + MISSED_AFTER_S, JOBS)
    assert request is not None
    assert request.tags == {"dagster/partition": "demo@v2|t", "agent_health/retry_of": "r1"}
