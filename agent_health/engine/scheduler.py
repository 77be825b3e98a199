"""Running the tests of one or more agent versions under ONE concurrency limit.

`run_plan` takes (agent engine, tests) pairs, keeps at most `concurrency` tests in flight over all
of them, hands each result to `on_result` the moment it finishes (the run's store and reporters;
a worker waits for it, so a slow store slows the run instead of filling memory), and stops
starting tests after the first failure with `fail_fast`, counting what never started per agent.
A run cancelled meanwhile (Ctrl-C, SIGTERM) hands on each test it cut short as `errored`, with
the reason `stop_reason` gives; `running` lists the tests in flight for whoever must end the run
while its loop cannot (see `agent_health.session.control`). With a `budget`, each test starts only
when the budget admits it (`agent_health.engine.budget`), with a tab its judge calls are held
against; once it does not admit one, or a test's judge call did not fit it, no more tests start.
Every test that never started is handed back in `PlanOutcome.unstarted`, with the reason, and so
is a test whose judge call the budget refused: it counts as not run, and is not handed to
`on_result` (never stored, so `--only missing` runs it again).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field

from agent_health.engine.budget import BUDGET_REACHED, Budget
from agent_health.engine.runner import AgentEngine, Scopes
from agent_health.loader.types import LoadedTest
from agent_health.model import TestResult

OnResult = Callable[[TestResult], Awaitable[None]]


@dataclass(frozen=True)
class Running:
    """A test in flight: its engine, the test, and when it started (Unix time)."""

    engine: AgentEngine
    test: LoadedTest
    started_at: float

    def unfinished(self, reason: str) -> TestResult:
        """This test's result when the run ends before it finishes: errored with `reason`."""
        return self.engine.unfinished(self.test, self.started_at, reason)


@dataclass
class PlanOutcome:
    """What happened to the plan: tests never started per agent version, and hook errors."""

    not_run: dict[str, int] = field(default_factory=dict)
    hook_errors: list[str] = field(default_factory=list)
    stopped_early: bool = False
    unstarted: list[tuple[str, LoadedTest]] = field(default_factory=list)  # (agent version, test), in plan order
    not_run_reason: str | None = None  # "budget reached", "fail-fast" or "interrupted"


async def run_plan(
    plan: Sequence[tuple[AgentEngine, Sequence[LoadedTest]]],
    scopes: Scopes,
    on_result: OnResult,
    *,
    concurrency: int,
    fail_fast: bool = False,
    running: dict[int, Running] | None = None,
    stop_reason: Callable[[], str | None] = lambda: None,
    budget: Budget | None = None,
    outcome: PlanOutcome | None = None,
) -> PlanOutcome:
    """Run every (engine, test) of `plan`, agent by agent in order, `concurrency` at a time.
    `running` (the caller's, may be read from another thread) holds the tests in flight; `outcome`
    (the caller's) is filled in even when the run is cancelled."""
    planned: dict[str, int] = {}
    for engine, tests in plan:
        planned[engine.agent_ref] = planned.get(engine.agent_ref, 0) + len(tests)
    started = dict.fromkeys(planned, 0)
    work: Iterator[tuple[AgentEngine, LoadedTest]] = ((e, t) for e, tests in plan for t in tests)
    stop = asyncio.Event()

    work_left: list[tuple[AgentEngine, LoadedTest]] = []  # taken from `work` after the run stopped
    refused: list[tuple[AgentEngine, LoadedTest]] = []  # started, then stopped by the budget before a judge call
    in_flight = running if running is not None else {}
    ids = itertools.count()

    async def worker() -> None:
        while not stop.is_set():
            # admitted before the next test is taken, so the tests that run are the plan's first ones
            if budget is not None and not await budget.admit():
                stop.set()
                return
            item = next(work, None)  # one shared iterator: each item goes to exactly one worker
            if item is None or stop.is_set():
                if budget is not None:
                    budget.release()
                if item is not None:
                    work_left.append(item)
                return
            engine, test = item
            started[engine.agent_ref] += 1
            key = next(ids)
            in_flight[key] = Running(engine, test, time.time())
            tab = budget.open(test.id, test.case.max_cost_usd) if budget is not None else None
            try:
                result = await engine.run_test(test, tab)
            except asyncio.CancelledError:  # the run was cancelled: this test ends errored, with why
                if budget is not None:
                    budget.release(tab)
                cut = in_flight.pop(key, None)
                if cut is not None:  # (None: the run was abandoned and reported it already)
                    await on_result(cut.unfinished(stop_reason() or "the run was cancelled"))
                raise
            in_flight.pop(key, None)
            if budget is not None:
                budget.charge(result, tab)
            if tab is not None and tab.refused is not None and tab.refused.budget:
                # a judge call did not fit the budget and was not made: the test is not run (its
                # agent's spend is counted), never stored, so `--only missing` runs it again
                started[engine.agent_ref] -= 1
                refused.append(item)
                stop.set()
                return
            await on_result(result)
            if fail_fast and result.status != "passed":
                stop.set()
            if stop.is_set():
                return

    outcome = outcome if outcome is not None else PlanOutcome()
    total = sum(planned.values())
    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(max(1, min(concurrency, total))):
                group.create_task(worker())
    finally:
        outcome.stopped_early = stop.is_set()
        await scopes.close()
        outcome.not_run = {agent: planned[agent] - started[agent] for agent in planned}
        # tests are taken in plan order, so the ones the budget stopped come before those never taken
        # (the plan's order is looked up only then: a map of every planned test is ~200 B a test)
        stopped = refused
        if len(refused) > 1:
            wanted = {(id(e), id(t)) for e, t in refused}
            order = {
                pair: i for i, pair in enumerate((id(e), id(t)) for e, tests in plan for t in tests) if pair in wanted
            }
            stopped = sorted(refused, key=lambda item: order[(id(item[0]), id(item[1]))])
        outcome.unstarted = [(e.agent_ref, t) for e, t in (*stopped, *work_left, *work)]
        if outcome.unstarted:
            if budget is not None and budget.reached is not None:
                outcome.not_run_reason = BUDGET_REACHED
            elif stop.is_set():
                outcome.not_run_reason = "fail-fast"
            else:
                outcome.not_run_reason = "interrupted"
        outcome.hook_errors = list(scopes.errors)
    return outcome
