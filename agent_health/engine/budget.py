"""A run's spend budget, kept by the scheduler (docs/budgets.md).

Spend is counted from each finished result (its agent and judge usage, priced from the price
table; judge cache hits cost nothing). Before a test starts, `admit` estimates what it and the
tests still in flight will spend, each at the most one finished test spent so far, and refuses
when that could pass a limit: it waits for the tests in flight, and once none is left and the next
test could still pass it, the run starts no more tests and the rest are reported as not run,
"budget reached". Until the first test has finished there is no estimate, so the first test runs
alone: its result prices the rest.
"""

from __future__ import annotations

import asyncio

from agent_health.model import BudgetSettings, BudgetSpend, TestResult

BUDGET_REACHED = "budget reached"


class Budget:
    """The spend of one run against its `BudgetSettings`; used from the run's event loop only."""

    def __init__(self, settings: BudgetSettings):
        self.settings = settings
        self.cost = 0.0
        self.judge_cost = 0.0
        self.tokens = 0
        self.cache_hits = 0
        self.reached: str | None = None
        self._finished = 0
        self._in_flight = 0
        # the most one test spent so far (cost, judge cost, tokens): the estimate of the next test
        self._most = (0.0, 0.0, 0)
        self._ended = asyncio.Event()

    async def admit(self) -> bool:
        """True when the next test may start (it then counts as in flight until `charge` or
        `release`); False once the budget could be passed, for this and every later call.

        While a limit could be passed only because of the tests in flight, it waits for them one
        by one (they may spend less than estimated): the run is declared over its budget only with
        nothing in flight, so it stops with less than one test's estimate left."""
        while self.settings.active and self.reached is None:
            if self._finished:
                over = self._over()
                if over is None:
                    break
                if not self._in_flight:
                    self.reached = over
                    break
            elif not self._in_flight:
                break  # the first test: nothing to estimate from yet
            await self._ended.wait()  # a test in flight ends: look again
        if self.reached is not None:
            return False
        self._in_flight += 1
        return True

    def _over(self) -> str | None:
        """The first limit the spend so far, the tests in flight and one more could pass."""
        ahead = self._in_flight + 1
        most_cost, most_judge, most_tokens = self._most
        for name, limit, spent, each in (
            ("max_cost_usd", self.settings.max_cost_usd, self.cost, most_cost),
            ("max_judge_cost_usd", self.settings.max_judge_cost_usd, self.judge_cost, most_judge),
            ("max_tokens", self.settings.max_tokens, self.tokens, most_tokens),
        ):
            if limit is not None and (spent >= limit or spent + ahead * each > limit):
                return name
        return None

    def charge(self, result: TestResult) -> None:
        """Count a finished test's spend (its `admit` slot ends)."""
        cost = result.cost_usd
        judge = result.judge_cost_usd
        tokens = result.usage.total_tokens + result.judge_usage.total_tokens
        if result.run is not None and result.run.replayed:  # a replayed agent run spent nothing now
            cost, tokens = judge, result.judge_usage.total_tokens
        self.cache_hits += sum(1 for s in result.signals if s.kind == "judge" and s.cached)
        if self.settings.counts_cost and (cost is None or judge is None) and self.reached is None:
            # spend that cannot be priced cannot be held to a budget: stop rather than guess zero
            models = sorted({m for m in (result.usage.model, result.judge_usage.model) if m})
            self.reached = f"cost unknown: no price for {', '.join(models) or 'a model'} (test {result.test_id})"
        self.cost += cost or 0.0
        self.judge_cost += judge or 0.0
        self.tokens += tokens
        self._finished += 1
        self._most = (
            max(self._most[0], cost or 0.0),
            max(self._most[1], judge or 0.0),
            max(self._most[2], tokens),
        )
        self.release()

    def release(self) -> None:
        """A test admitted ended without a result to charge (cancelled)."""
        self._in_flight = max(0, self._in_flight - 1)
        ended, self._ended = self._ended, asyncio.Event()
        ended.set()

    def spend(self) -> BudgetSpend:
        """The spend so far against the limits."""
        return BudgetSpend(
            max_cost_usd=self.settings.max_cost_usd,
            max_judge_cost_usd=self.settings.max_judge_cost_usd,
            max_tokens=self.settings.max_tokens,
            cost_usd=round(self.cost, 8),
            judge_cost_usd=round(self.judge_cost, 8),
            tokens=self.tokens,
            judge_cache_hits=self.cache_hits,
            reached=self.reached,
        )
