"""The instance settings that keep automation going on a small, busy machine: a run whose code
server did not answer is dequeued again, a run whose worker crashed or could not start is retried
(a step failure is not), code servers get time to load, and calls to them wait longer than
Dagster's 60 s default. The local instance the project writes and the PostgreSQL template agree."""

from __future__ import annotations

import pytest
import yaml
from dagster import DagsterInstance

from agent_health_dagster.dagster_env import DAGSTER_ENV
from agent_health_dagster.headless import CODE_SERVERS, RUN_QUEUE, RUN_RETRIES, instance_yaml
from tests.conftest import ROOT

pytestmark = pytest.mark.filterwarnings("ignore")


def test_the_local_instance_dequeues_again_retries_and_waits_for_code_servers(tmp_path):
    (tmp_path / "dagster.yaml").write_text(instance_yaml())
    with DagsterInstance.from_config(str(tmp_path)) as instance:  # the schema accepts it as written
        assert instance.run_retries_enabled and instance.run_retries_max_retries == 2
        assert not instance.run_retries_retry_on_asset_or_op_failure
        coordinator = instance.run_coordinator
        assert coordinator.get_run_queue_config().max_user_code_failure_retries == 3
        assert coordinator.get_run_queue_config().user_code_failure_retry_delay == 30
        # runs of one partition (a version's refresh) wait for each other, in creation order
        [limit] = coordinator.get_run_queue_config().tag_concurrency_limits
        assert limit == {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
        assert instance.code_server_process_startup_timeout == 360
    assert int(DAGSTER_ENV["DAGSTER_GRPC_TIMEOUT_SECONDS"]) > 60


def test_the_postgres_template_carries_the_same_settings():
    template = yaml.safe_load((ROOT / "deploy" / "postgres" / "dagster.yaml").read_text())
    assert template["run_retries"] == RUN_RETRIES
    assert template["code_servers"] == CODE_SERVERS
    queue = {k: v for k, v in RUN_QUEUE.items() if k != "tag_concurrency_limits"}
    assert template["run_coordinator"]["config"] == queue
    # with `concurrency: runs:` set, Dagster takes run tag limits there only
    assert template["concurrency"]["runs"]["tag_concurrency_limits"] == RUN_QUEUE["tag_concurrency_limits"]
