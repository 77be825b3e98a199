"""The data model and the contracts every layer shares: pydantic, JSON-serializable, versioned."""

from agent_health.model.agent import AgentRequest, ResolvedAgent
from agent_health.model.case import ContextItem, ExpectedStep, TestCase
from agent_health.model.conversation import SimulatedUser
from agent_health.model.judge import JudgeRequest
from agent_health.model.provenance import JudgeIdentity, Provenance, harness_version
from agent_health.model.report import BudgetSpend, NotRunTest, RunReport, RunSummary
from agent_health.model.result import SCHEMA_VERSION, Insight, Judgement, TestResult, TestStatus, TrialResult
from agent_health.model.run import (
    CONVERSATION_ENDS,
    ROLES,
    STEP_KINDS,
    Artifact,
    Conversation,
    RunResult,
    Step,
    Turn,
    Usage,
)
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
    "CONVERSATION_ENDS",
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
    "Conversation",
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
    "SimulatedUser",
    "Step",
    "StoreSettings",
    "TestCase",
    "TestResult",
    "TestStatus",
    "TrialResult",
    "Turn",
    "Usage",
    "Verdict",
    "check_replay_mode",
    "harness_version",
    "new_run_id",
]
