"""The data model: pydantic, JSON-serializable, versioned."""

from agent_health.model.case import ContextItem, ExpectedStep, TestCase
from agent_health.model.report import RunReport, RunSummary
from agent_health.model.result import SCHEMA_VERSION, Insight, TestResult, TestStatus, TrialResult
from agent_health.model.run import STEP_KINDS, RunResult, Step, Usage
from agent_health.model.signal import Signal, Verdict

__all__ = [
    "SCHEMA_VERSION",
    "STEP_KINDS",
    "ContextItem",
    "ExpectedStep",
    "Insight",
    "RunReport",
    "RunResult",
    "RunSummary",
    "Signal",
    "Step",
    "TestCase",
    "TestResult",
    "TestStatus",
    "TrialResult",
    "Usage",
    "Verdict",
]
