"""What a pipeline transport (the Dagster code location) needs from the library: the project
(configuration, eval root, result store), running exactly a set of partitions, keeping test
partitions in step with the eval files, data versions of agent versions, gating rollups, and
tables with readable numbers. No Dagster import here."""

from agent_health.config.fingerprints import agent_version_data_version, judge_settings
from agent_health.pipeline.execute import failure_reason, partition_metadata, run_partitions
from agent_health.pipeline.gates import Gate, Thresholds, rollup_gates
from agent_health.pipeline.project import Project, clear_project_cache
from agent_health.pipeline.sync import SuiteSync, plan_suite_sync
from agent_health.pipeline.tables import Column, Table, ms, percent, sig

__all__ = [
    "Column",
    "Gate",
    "Project",
    "SuiteSync",
    "Table",
    "Thresholds",
    "agent_version_data_version",
    "clear_project_cache",
    "failure_reason",
    "judge_settings",
    "ms",
    "partition_metadata",
    "percent",
    "plan_suite_sync",
    "rollup_gates",
    "run_partitions",
    "sig",
]
