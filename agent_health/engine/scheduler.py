"""Running the tests of one or more agent versions under ONE concurrency limit.

`run_plan` takes (agent engine, tests) pairs, keeps at most `concurrency` tests in flight over all
of them, hands each result to `on_result` the moment it finishes (the run's store and reporters;
a worker waits for it, so a slow store slows the run instead of filling memory), and stops
starting tests after the first failure with `fail_fast`, counting what never started per agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field

from agent_health.engine.runner import AgentEngine, Scopes
from agent_health.loader.types import LoadedTest
from agent_health.model import TestResult

OnResult = Callable[[TestResult], Awaitable[None]]


@dataclass
class PlanOutcome:
    """What happened to the plan: tests never started per agent version, and hook errors."""

    not_run: dict[str, int] = field(default_factory=dict)
    hook_errors: list[str] = field(default_factory=list)
    stopped_early: bool = False


async def run_plan(
    plan: Sequence[tuple[AgentEngine, Sequence[LoadedTest]]],
    scopes: Scopes,
    on_result: OnResult,
    *,
    concurrency: int,
    fail_fast: bool = False,
) -> PlanOutcome:
    """Run every (engine, test) of `plan`, agent by agent in order, `concurrency` at a time."""
    planned: dict[str, int] = {}
    for engine, tests in plan:
        planned[engine.agent_ref] = planned.get(engine.agent_ref, 0) + len(tests)
    started = dict.fromkeys(planned, 0)
    work: Iterator[tuple[AgentEngine, LoadedTest]] = ((e, t) for e, tests in plan for t in tests)
    stop = asyncio.Event()

    async def worker() -> None:
        for engine, test in work:  # one shared iterator: each item goes to exactly one worker
            started[engine.agent_ref] += 1
            result = await engine.run_test(test)
            await on_result(result)
            if fail_fast and result.status != "passed":
                stop.set()
            if stop.is_set():
                return

    outcome = PlanOutcome()
    total = sum(planned.values())
    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(max(1, min(concurrency, total))):
                group.create_task(worker())
    finally:
        outcome.stopped_early = stop.is_set()
        await scopes.close()
        outcome.not_run = {agent: planned[agent] - started[agent] for agent in planned}
        outcome.hook_errors = list(scopes.errors)
    return outcome
