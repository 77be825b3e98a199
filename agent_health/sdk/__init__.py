"""The authoring API, a thin top layer: `test`, `describe`, hooks and fixtures, and the
capabilities a body uses (`agent`, `expect`, `judge`, `TestInfo`)."""

from agent_health.capabilities import AgentProxy, TestInfo, expect, judge
from agent_health.sdk.api import after_all, after_each, before_all, before_each, describe, fixture, test

__all__ = [
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
]
