"""agent-health: an evaluation harness for AI agents.

Write tests with `test`, drive the agent with the `agent` fixture, assert with `expect` and
`judge`; run them with `agent-health run` or as Dagster assets.
"""

from agent_health.analysis.frames import results_frame
from agent_health.config import AgentSpec, Config, JudgeSettings, define_config, load_config
from agent_health.errors import (
    AgentError,
    AgentHealthError,
    ConfigError,
    EvalFileError,
    InfrastructureError,
    TracesNotEnabled,
    TracesUnavailable,
    UsageError,
)
from agent_health.judges.rubric import Rubric, load_rubric
from agent_health.loader import LoadedTest, LoadResult, load_tests
from agent_health.model import (
    SCHEMA_VERSION,
    ContextItem,
    EvalRun,
    ExpectedStep,
    Insight,
    JudgeIdentity,
    Judgement,
    Provenance,
    RunReport,
    RunResult,
    RunSettings,
    RunSummary,
    Signal,
    Step,
    TestCase,
    TestResult,
    TrialResult,
    Usage,
    Verdict,
)
from agent_health.sdk import (
    AgentProxy,
    TestInfo,
    after_all,
    after_each,
    before_all,
    before_each,
    describe,
    expect,
    fixture,
    judge,
    test,
)
from agent_health.session import RejudgeOutcome, RunOutcome, build_settings, rejudge, run_evaluation, run_tests
from agent_health.traces.view import TracesView

__version__ = "0.1.0"

agent = AgentProxy()

__all__ = [
    "SCHEMA_VERSION",
    "AgentError",
    "AgentHealthError",
    "AgentSpec",
    "Config",
    "ConfigError",
    "ContextItem",
    "EvalFileError",
    "EvalRun",
    "ExpectedStep",
    "InfrastructureError",
    "Insight",
    "JudgeIdentity",
    "Judgement",
    "LoadResult",
    "LoadedTest",
    "Provenance",
    "RejudgeOutcome",
    "RunOutcome",
    "RunReport",
    "RunResult",
    "RunSettings",
    "RunSummary",
    "Signal",
    "Step",
    "TestCase",
    "TestInfo",
    "TestResult",
    "TracesNotEnabled",
    "TracesUnavailable",
    "TracesView",
    "TrialResult",
    "Usage",
    "UsageError",
    "Verdict",
    "__version__",
    "after_all",
    "after_each",
    "agent",
    "before_all",
    "before_each",
    "build_settings",
    "define_config",
    "describe",
    "expect",
    "fixture",
    "judge",
    "load_config",
    "load_tests",
    "rejudge",
    "results_frame",
    "run_evaluation",
    "run_tests",
    "test",
]
__all__ += ["JudgeSettings", "Rubric", "load_rubric"]
