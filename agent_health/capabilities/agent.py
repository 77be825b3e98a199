"""The `agent` fixture: `agent.run()` invokes the agent exactly once per test."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agent_health.capabilities.context import Pending, TestContext, bridge, current_context
from agent_health.connectors.base import random_hex
from agent_health.errors import AgentRunTwiceError, InfrastructureError
from agent_health.model import RunResult
from agent_health.model.agent import AgentRequest
from agent_health.model.case import to_context
from agent_health.spend import current_tab


class AgentFixture:
    """Bound to one test. `run()` returns an immutable RunResult; a second call raises."""

    def __init__(self, ctx: TestContext):
        self._ctx = ctx

    @property
    def key(self) -> str:
        return self._ctx.info.agent

    def run(
        self,
        prompt: str | None = None,
        *,
        context: Iterable[Any] | None = None,
        env: Mapping[str, str] | None = None,
        files: Mapping[str, Any] | None = None,
        provisioned: Mapping[str, Any] | None = None,
    ) -> Any:
        """Run the agent once. Uses the test's prompt and context when none are given."""
        ctx = self._ctx
        with ctx.lock:
            ctx.check_open("agent.run()")
            if ctx.run_started:
                raise AgentRunTwiceError(
                    f"test {ctx.case.name!r}: agent.run() was already called; a test runs the agent once "
                    "(one test, one trajectory, one comparable data point)"
                )
            ctx.run_started = True
        text = prompt if prompt is not None else ctx.case.prompt
        if not text:
            raise InfrastructureError(
                f"test {ctx.case.name!r}: agent.run() has no prompt; pass one or set prompt= on @test"
            )
        items = to_context(context) if context is not None else ctx.case.context
        # empty mappings are left to their defaults: each one given is validated (copied) again
        given = {
            name: dict(value) for name, value in (("env", env), ("files", files), ("provisioned", provisioned)) if value
        }
        request = AgentRequest(
            prompt=text,
            context=tuple(i.model_dump() for i in items),
            **given,
            test_id=ctx.case.id,
            timeout_s=ctx.case.timeout_s,
            # the runtime's ids, made here: the runtime then has no copy of the request to make
            run_id=random_hex(128),
            trace_id=random_hex(128),
            span_id=random_hex(64),
        )
        out = bridge(ctx, self._invoke(request))
        if isinstance(out, RunResult):
            return out
        ctx.run_call = PendingRun(out)
        return ctx.run_call

    async def _invoke(self, request: AgentRequest) -> RunResult:
        if self._ctx.runtime is None:
            raise InfrastructureError("no agent configured for this run")
        result = await self._ctx.runtime.invoke(request)
        view = self._ctx.runtime.traces_for(result)
        if view is not None:
            self._ctx.trace_views[result.run_id] = view
        self._ctx.run = result
        if (tab := current_tab()) is not None:  # its spend counts against the budget from now on
            tab.count_agent(result.usage, replayed=result.replayed)
        return result


class PendingRun(Pending):
    """What `agent.run()` returns in an async body: await it for the RunResult. The engine reports
    one that was never awaited (the agent never ran) instead of passing with no signals."""


class AgentProxy:
    """`from agent_health import agent` works too: it forwards to the running test's agent."""

    def run(self, *args: Any, **kw: Any) -> Any:
        return AgentFixture(current_context("agent.run()")).run(*args, **kw)
