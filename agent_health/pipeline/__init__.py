"""What a pipeline transport (the Dagster code location) needs from the library: the project
(configuration, eval root, result store), running exactly a set of partitions, keeping test
partitions in step with the eval files, and gating rollups. No Dagster import here."""

from agent_health.pipeline.execute import partition_metadata, run_partitions
from agent_health.pipeline.gates import Gate, Thresholds, rollup_gates
from agent_health.pipeline.project import Project
from agent_health.pipeline.sync import SuiteSync, plan_suite_sync

__all__ = [
    "Gate",
    "Project",
    "SuiteSync",
    "Thresholds",
    "partition_metadata",
    "plan_suite_sync",
    "rollup_gates",
    "run_partitions",
]
