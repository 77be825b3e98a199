"""The data model and the contracts every layer shares: pydantic, JSON-serializable, versioned."""

from agent_health.model.agent import AgentRequest, ResolvedAgent
from agent_health.model.case import ContextItem, ExpectedStep, TestCase
from agent_health.model.judge import JudgeRequest
from agent_health.model.provenance import JudgeIdentity, Provenance, harness_version
from agent_health.model.report import BudgetSpend, NotRunTest, RunReport, RunSummary
from agent_health.model.result import SCHEMA_VERSION, Insight, Judgement, TestResult, TestStatus, TrialResult
from agent_health.model.run import ROLES, STEP_KINDS, Artifact, RunResult, Step, Usage
from agent_health.model.runs import EvalRun, RunStatus, new_run_id
from agent_health.model.settings import (
    ONLY_RULES,
    REPLAY_MODES,
    BudgetSettings,
    JudgeRunSettings,
    OnlyRule,
    ReplayMode,
    RunSettings,
    Shard,
    StoreSettings,
    check_replay_mode,
)
from agent_health.model.signal import Signal, Verdict

__all__ = [
    "ONLY_RULES",
    "REPLAY_MODES",
    "ROLES",
    "SCHEMA_VERSION",
    "STEP_KINDS",
    "AgentRequest",
    "Artifact",
    "BudgetSettings",
    "BudgetSpend",
    "ContextItem",
    "EvalRun",
    "ExpectedStep",
    "Insight",
    "JudgeIdentity",
    "JudgeRequest",
    "JudgeRunSettings",
    "Judgement",
    "NotRunTest",
    "OnlyRule",
    "Provenance",
    "ReplayMode",
    "ResolvedAgent",
    "RunReport",
    "RunResult",
    "RunSettings",
    "RunStatus",
    "RunSummary",
    "Shard",
    "Signal",
    "Step",
    "StoreSettings",
    "TestCase",
    "TestResult",
    "TestStatus",
    "TrialResult",
    "Usage",
    "Verdict",
    "check_replay_mode",
    "harness_version",
    "new_run_id",
]
