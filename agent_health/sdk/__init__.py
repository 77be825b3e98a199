"""The authoring API, a thin top layer: `test`, `describe`, hooks and fixtures, and the
capabilities a body uses (`agent`, `expect`, `judge`, `TestInfo`), and the named judges."""

from agent_health.capabilities import AgentProxy, TestInfo, expect, judge
from agent_health.judges.kit import Factuality, Judge, StructuredOutputJudge, ToolCallJudge, create_judge
from agent_health.sdk.api import (
    after_all,
    after_each,
    before_all,
    before_each,
    describe,
    fixture,
    test,
    use_judges,
)

__all__ = [
    "AgentProxy",
    "Factuality",
    "Judge",
    "StructuredOutputJudge",
    "TestInfo",
    "ToolCallJudge",
    "after_all",
    "after_each",
    "before_all",
    "before_each",
    "create_judge",
    "describe",
    "expect",
    "fixture",
    "judge",
    "test",
    "use_judges",
]
