"""agent-health: an evaluation harness for AI agents.

Write tests with `test`, drive the agent with the `agent` fixture, assert with `expect` and
`judge`; run them with `agent-health run` or as Dagster assets.

Every public name is imported on first use (PEP 562): `from agent_health import test, expect` in
an eval file loads the authoring API, not the stores, judges, reports and data frames behind the
rest of this list.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_LAZY: dict[str, str] = {
    "results_frame": "agent_health.analysis.frames",
    **dict.fromkeys(["AgentSpec", "Config", "JudgeSettings", "define_config", "load_config"], "agent_health.config"),
    **dict.fromkeys(
        [
            "AgentError",
            "AgentHealthError",
            "ConfigError",
            "EvalFileError",
            "InfrastructureError",
            "TracesNotEnabled",
            "TracesUnavailable",
            "UsageError",
        ],
        "agent_health.errors",
    ),
    **dict.fromkeys(
        ["Factuality", "Judge", "StructuredOutputJudge", "ToolCallJudge", "create_judge"], "agent_health.judges.kit"
    ),
    **dict.fromkeys(["Rubric", "load_rubric"], "agent_health.judges.rubric"),
    **dict.fromkeys(["LoadedTest", "LoadResult", "load_tests"], "agent_health.loader"),
    **dict.fromkeys(
        [
            "SCHEMA_VERSION",
            "ContextItem",
            "EvalRun",
            "ExpectedStep",
            "Insight",
            "JudgeIdentity",
            "Judgement",
            "Provenance",
            "RunReport",
            "RunResult",
            "RunSettings",
            "RunSummary",
            "Signal",
            "Step",
            "TestCase",
            "TestResult",
            "TrialResult",
            "Usage",
            "Verdict",
        ],
        "agent_health.model",
    ),
    **dict.fromkeys(
        [
            "AgentProxy",
            "TestInfo",
            "after_all",
            "after_each",
            "before_all",
            "before_each",
            "describe",
            "expect",
            "fixture",
            "judge",
            "test",
            "use_judges",
        ],
        "agent_health.sdk",
    ),
    **dict.fromkeys(["RunOutcome", "build_settings", "run_evaluation", "run_tests"], "agent_health.session"),
    **dict.fromkeys(["RejudgeOutcome", "rejudge"], "agent_health.session.rejudge"),
    "TracesView": "agent_health.traces.view",
}

if TYPE_CHECKING:  # what the names are, for type checkers and editors
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
    from agent_health.judges.kit import Factuality, Judge, StructuredOutputJudge, ToolCallJudge, create_judge
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
        use_judges,
    )
    from agent_health.session import RunOutcome, build_settings, run_evaluation, run_tests
    from agent_health.session.rejudge import RejudgeOutcome, rejudge
    from agent_health.traces.view import TracesView

    agent: AgentProxy


def __getattr__(name: str) -> Any:
    if name == "agent":
        value: Any = __getattr__("AgentProxy")()
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'agent_health' has no attribute {name!r}")
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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
    "Factuality",
    "InfrastructureError",
    "Insight",
    "Judge",
    "JudgeIdentity",
    "JudgeSettings",
    "Judgement",
    "LoadResult",
    "LoadedTest",
    "Provenance",
    "RejudgeOutcome",
    "Rubric",
    "RunOutcome",
    "RunReport",
    "RunResult",
    "RunSettings",
    "RunSummary",
    "Signal",
    "Step",
    "StructuredOutputJudge",
    "TestCase",
    "TestInfo",
    "TestResult",
    "ToolCallJudge",
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
    "create_judge",
    "define_config",
    "describe",
    "expect",
    "fixture",
    "judge",
    "load_config",
    "load_rubric",
    "load_tests",
    "rejudge",
    "results_frame",
    "run_evaluation",
    "run_tests",
    "test",
    "use_judges",
]
