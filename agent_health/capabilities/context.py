"""The per-test context. One per test invocation; reached through a ContextVar, never a global."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_health.errors import UsageError
from agent_health.model import Signal, TestCase, Usage
from agent_health.model.run import TRACE_VIEWS
from agent_health.pricing import total_cost

if TYPE_CHECKING:  # pragma: no cover
    from agent_health.connectors.base import AgentRuntime
    from agent_health.judges.service import JudgeService
    from agent_health.model import RunResult


@dataclass
class TestInfo:
    """What a body or hook may know about the running test (the `test_info` fixture)."""

    __test__ = False

    id: str
    name: str
    suite: str
    labels: tuple[str, ...]
    prompt: str | None
    agent: str
    epoch: int = 0
    annotations: dict[str, Any] = field(default_factory=dict)


@dataclass
class TestContext:
    """Signals and capabilities of one running test. Concurrent tests never share one."""

    __test__ = False

    case: TestCase
    info: TestInfo
    runtime: AgentRuntime | None
    judges: JudgeService
    skip_judge: bool = False
    signals: list[Signal] = field(default_factory=list)
    run: RunResult | None = None
    trace_views: dict[str, Any] = field(default_factory=dict)  # run id -> TracesView of this test's runs
    run_started: bool = False
    pending: list[Any] = field(default_factory=list)  # judge() calls an async body may forget to await
    run_call: Any = None  # what agent.run() returned in an async body, to tell when it was never awaited
    loop: Any = None  # the engine's event loop, so sync bodies can call async capabilities
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False
    cost_cap_usd: float | None = None  # the test's cap (`@test(max_cost_usd=...)`), None: none
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    spent_before_usd: float | None = 0.0  # what the test's earlier epochs spent (None: unknown)

    def spent_usd(self) -> float | None:
        """What the test has spent so far (earlier epochs, this trial's agent run and judge calls),
        priced from the price table; None when some part has no price."""
        usages = [self.run.usage] if self.run is not None else []
        if self.run is not None and self.run.conversation is not None and self.run.conversation.user_calls:
            usages.append(self.run.conversation.user_usage)  # the simulated user's model calls
        with self.lock:
            usages += [
                Usage(**s.evidence["usage"])
                for s in self.signals
                if s.kind == "judge" and s.evidence and "usage" in s.evidence
            ]
        cost = total_cost(usages, self.prices)
        return None if cost is None or self.spent_before_usd is None else self.spent_before_usd + cost

    def record(self, signal: Signal) -> None:
        with self.lock:  # sync bodies record from worker threads
            self.check_open(signal.name)
            self.signals.append(signal)

    def check_open(self, what: str) -> None:
        """A sync body abandoned at its timeout keeps running in its thread: it must not change a
        result that is already final."""
        if self.closed:
            raise UsageError(f"test {self.case.name!r} already finished (timed out); {what} was ignored")

    def close(self) -> None:
        with self.lock:
            self.closed = True

    def unawaited_run(self) -> str | None:
        """The error for an `agent.run()` an async body called but never awaited (it never ran)."""
        call = self.run_call
        if call is None or call.awaited:
            return None
        call.close()
        return (
            f"test {self.case.name!r}: agent.run() was called but never awaited, so the agent never ran; "
            "write `result = await agent.run(...)` in an async test"
        )


class Pending:
    """What a capability returns in an async body: await it for the value. The engine checks
    `awaited` once the body returned, and closes what never will be."""

    def __init__(self, coro: Any):
        self._coro = coro
        self.awaited = False

    def __await__(self) -> Any:
        self.awaited = True
        return self._coro.__await__()

    def close(self) -> None:
        """Drop a call that will never be awaited (the body already stopped)."""
        if not self.awaited:
            self._coro.close()


_current: ContextVar[TestContext | None] = ContextVar("agent_health_test_context", default=None)


def bridge(ctx: TestContext, coro: Any) -> Any:
    """In an async body return the awaitable; in a sync body (worker thread) run it to completion."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run_coroutine_threadsafe(coro, ctx.loop).result()
    else:
        return coro


def running_test() -> TestContext | None:
    """The context of the test whose code is running here, or None outside test code."""
    return _current.get()


def current_context(what: str) -> TestContext:
    ctx = _current.get()
    if ctx is None:
        raise UsageError(f"{what} was used outside a running test; call it inside a @test body")
    return ctx


def set_context(ctx: TestContext | None) -> tuple[Any, Any]:
    """Make `ctx` the running test's context (and its runs' traces reachable as `result.traces`)."""
    return _current.set(ctx), TRACE_VIEWS.set(ctx.trace_views if ctx is not None else None)


def reset_context(token: tuple[Any, Any]) -> None:
    _current.reset(token[0])
    TRACE_VIEWS.reset(token[1])
