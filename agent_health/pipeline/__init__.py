"""What a pipeline transport (the Dagster code location) needs from the library: the project
(configuration, eval root, result store), running exactly a set of partitions, keeping test
partitions in step with the eval files, data versions of agent versions, gating rollups, and
tables with readable numbers; per agent version a suite's rollup, metrics, insights, comparison and
gates; per judge identity its calibration against the stored human labels; across suites the
leaderboard and a version's comparison; re-judging partitions. No Dagster import here. It is the
transport's one door into the library (with `agent_health.errors`): the model types and settings a
transport handles are re-exported here too."""

from agent_health.config.deployment import (
    DeploymentSettings,
    MissingEvidence,
    deployment_settings,
    deployment_variable,
    sized_run_seconds,
)
from agent_health.config.fingerprints import agent_version_data_version, judge_settings
from agent_health.loader import LoadResult
from agent_health.model import RunSettings, TestResult
from agent_health.model.settings import DeclaredSetting, declared_settings
from agent_health.pipeline.benchmark import (
    LeaderboardView,
    VersionComparison,
    build_leaderboard,
    compare_version,
    comparison_report_name,
    write_report,
)
from agent_health.pipeline.calibration import (
    JUDGES_CALIBRATED,
    JudgeCalibration,
    LabelledJudge,
    LabelledJudges,
    calibrate_identities,
    judge_partition_key,
    labelled_judges,
)
from agent_health.pipeline.execute import failure_reason, partition_metadata, run_partitions
from agent_health.pipeline.freshness import (
    UP_TO_DATE,
    Current,
    freshness_description,
    freshness_gate,
    out_of_date,
    out_of_date_results,
)
from agent_health.pipeline.gates import Gate, Thresholds, rollup_gates
from agent_health.pipeline.project import Project, clear_project_cache
from agent_health.pipeline.rejudge import RejudgedPartitions, rejudge_partitions
from agent_health.pipeline.sync import SuiteSync, plan_suite_sync
from agent_health.pipeline.tables import Column, Table, ms, percent, sig
from agent_health.pipeline.version import (
    MetricStats,
    SuiteVersion,
    current_summaries,
    list_table,
    previous_version,
    summarize_version,
)
from agent_health.session import build_settings

__all__ = [
    "JUDGES_CALIBRATED",
    "UP_TO_DATE",
    "Column",
    "Current",
    "DeclaredSetting",
    "DeploymentSettings",
    "Gate",
    "JudgeCalibration",
    "LabelledJudge",
    "LabelledJudges",
    "LeaderboardView",
    "LoadResult",
    "MetricStats",
    "MissingEvidence",
    "Project",
    "RejudgedPartitions",
    "RunSettings",
    "SuiteSync",
    "SuiteVersion",
    "Table",
    "TestResult",
    "Thresholds",
    "VersionComparison",
    "agent_version_data_version",
    "build_leaderboard",
    "build_settings",
    "calibrate_identities",
    "clear_project_cache",
    "compare_version",
    "comparison_report_name",
    "current_summaries",
    "declared_settings",
    "deployment_settings",
    "deployment_variable",
    "failure_reason",
    "freshness_description",
    "freshness_gate",
    "judge_partition_key",
    "judge_settings",
    "labelled_judges",
    "list_table",
    "ms",
    "out_of_date",
    "out_of_date_results",
    "partition_metadata",
    "percent",
    "plan_suite_sync",
    "previous_version",
    "rejudge_partitions",
    "rollup_gates",
    "run_partitions",
    "sig",
    "sized_run_seconds",
    "summarize_version",
    "write_report",
]
