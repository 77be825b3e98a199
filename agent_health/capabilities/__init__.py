"""What a running test body uses: its per-test context and the `agent`, `expect` and `judge`
capabilities bound to it. The engine provides them as fixtures; `agent_health.sdk` re-exports them."""

from agent_health.capabilities.agent import AgentFixture, AgentProxy
from agent_health.capabilities.context import TestContext, TestInfo, current_context
from agent_health.capabilities.expect import expect
from agent_health.capabilities.judge import judge

__all__ = ["AgentFixture", "AgentProxy", "TestContext", "TestInfo", "current_context", "expect", "judge"]
