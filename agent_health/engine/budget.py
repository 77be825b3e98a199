"""A run's spend budget, kept by the scheduler (docs/budgets.md).

Two checks hold a run to its budget:

- Before each judge model call (`agent_health.spend`), the call's estimate (its prompt's size, its
  answer at the judge's max output tokens, priced from the price table) is held against the spend
  so far: the tests finished, what the tests in flight counted, the estimates of the calls in
  flight, and for each test whose agent run is still to come the most one agent run has spent. A
  call that fits is reserved and made, and its usage replaces the reservation once it returns. A
  call that does not fit waits while calls in flight might make room (they may spend less than
  their estimate); when none can, it is not made: its test ends not run, "budget reached", and
  the run starts no more tests. Waiting calls take the room made in the order their tests were
  admitted (the plan's order): a later test's call never takes room an earlier test's call waits
  for, however late the loop runs the waiters, so the tests that run are the plan's first ones.
- Before a test starts, `admit` estimates what it and the tests still in flight will spend, each
  at the most one finished test spent so far, and refuses when that could pass a limit: it waits
  for the tests in flight, and once none is left and the next test could still pass it, the run
  starts no more tests. An agent run has no size before it is made, so while a limit counts agent
  spend (`max_cost_usd`, `max_tokens`) and the agents spend (not re-judging), the first test runs
  alone: its agent run prices the others'. Judge spend alone (`max_judge_cost_usd`, re-judging) is
  held call by call, so tests start at the usual concurrency from the first.
"""

from __future__ import annotations

import asyncio

from agent_health.model import BudgetSettings, BudgetSpend, TestResult
from agent_health.spend import NOTHING, Spend, SpendRefused, Tab, unknown_cost

BUDGET_REACHED = "budget reached"
COST_UNKNOWN = "cost unknown"
TOKENS_UNKNOWN = "tokens unknown"


class Budget:
    """The spend of one run against its `BudgetSettings`; used from the run's event loop only.
    `agents_spend` is False when every agent run is replayed (re-judging): only judge calls spend."""

    def __init__(
        self,
        settings: BudgetSettings,
        prices: dict[str, tuple[float, float]] | None = None,
        *,
        agents_spend: bool = True,
    ):
        self.settings = settings
        self.prices = dict(prices or {})
        self.agents_spend = agents_spend
        self.cost = 0.0
        self.judge_cost = 0.0
        self.tokens = 0
        self.cache_hits = 0
        self.reached: str | None = None
        self._finished = 0
        self._in_flight = 0
        self._tabs: dict[Tab, int] = {}  # the tabs of the tests in flight, with their admission number
        self._opened = 0
        # the most one test spent so far (cost, judge cost, tokens): the estimate of the next test
        self._most = (0.0, 0.0, 0)
        self._most_run = NOTHING  # the most one agent run spent: the estimate of an agent run to come
        self._ended = asyncio.Event()
        # an agent run has no size before it is made: the first one prices the rest
        self._probe_first = agents_spend and (settings.max_cost_usd is not None or settings.max_tokens is not None)

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
            elif not self._in_flight or not self._probe_first:
                break  # the first test, or judge spend alone: each call is held before it is made
            await self._ended.wait()  # a test in flight ends: look again
        if self.reached is not None:
            return False
        self._in_flight += 1
        return True

    def open(self, test_id: str, cap_usd: float | None = None) -> Tab:
        """The tab of a test admitted: its judge calls are held against this budget (and its cap)."""
        tab = Tab(test_id, cap_usd=cap_usd, prices=self.prices, pool=self)
        self._tabs[tab] = self._opened
        self._opened += 1
        return tab

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

    # -- judge calls (agent_health.spend.Pool) ---------------------------------------------------
    def _pending(self, tab: Tab) -> Spend:
        """What a tab's agent run still to come is estimated at (the most one run has spent)."""
        if not self.agents_spend or not tab.run_pending:
            return NOTHING
        return Spend(self._most_run.cost_usd, 0.0, self._most_run.tokens)

    def _committed(self) -> Spend:
        """The spend so far with every reservation and every agent run to come of the tests in flight."""
        total = Spend(self.cost, self.judge_cost, self.tokens)
        for tab in self._tabs:
            total += tab.counted + tab.reserved + self._pending(tab)
        return total

    def _over_call(self, estimate: Spend) -> tuple[str, float] | None:
        """The first limit (name, amount) that the spend committed and `estimate` would pass."""
        after = self._committed() + estimate
        for name, limit, value in (
            ("max_cost_usd", self.settings.max_cost_usd, after.cost_usd),
            ("max_judge_cost_usd", self.settings.max_judge_cost_usd, after.judge_usd),
            ("max_tokens", self.settings.max_tokens, after.tokens),
        ):
            # a hair of rounding slack: prices are rounded to 8 places, counted and estimated alike
            if limit is not None and value > limit + 1e-9:
                return name, limit
        return None

    def _may_make_room(self) -> bool:
        """Whether something in flight may yet spend less than it holds: a call reserved, or an
        agent run to come of a test that is not itself waiting for room."""
        return any(t.reserved or (not t.waiting and self._pending(t)) for t in self._tabs)

    def _earlier_waiting(self, tab: Tab) -> bool:
        """Whether a test admitted before `tab`'s has a call waiting for room (it takes room first)."""
        mine = self._tabs.get(tab, self._opened)
        return any(t.waiting and n < mine for t, n in self._tabs.items())

    async def reserve(self, tab: Tab, estimate: Spend, unpriced: str | None = None) -> None:
        """Reserve a judge call's `estimate` on `tab` once it fits every limit and no test admitted
        before it has a call waiting; wait while calls in flight may make room; raise `SpendRefused`
        (and stop the run starting tests) when none can.

        The order matters when room comes at once (several calls settle before the waiters run, as
        on a busy machine): the first waiter to look again would take it, and a later test's long
        call could take the room an earlier test's short one needs, which then is not made."""
        unknown = f"no price for {unpriced}" if unpriced else tab.unknown
        counts_tokens = self.settings.max_tokens is not None
        if (
            (self.settings.counts_cost and unknown)
            or (counts_tokens and tab.unreported)
            or ((self.reached or "").startswith((COST_UNKNOWN, TOKENS_UNKNOWN)))
        ):
            if self.reached is None:
                if self.settings.counts_cost and unknown:
                    self.reached = f"{COST_UNKNOWN}: {unknown} (test {tab.test_id})"
                else:
                    self.reached = f"{TOKENS_UNKNOWN}: the agent reported no usage (test {tab.test_id})"
            raise SpendRefused(
                f"{BUDGET_REACHED}: the judge call's cost cannot be held to the budget ({self.reached})",
                budget=True,
                limit="max_cost_usd",
            )
        tab.waiting += 1
        try:
            while (over := self._over_call(estimate)) is not None or self._earlier_waiting(tab):
                if over is not None and not self._may_make_room():
                    name, limit = over
                    self.reached = self.reached or name
                    amount = f"{estimate.tokens:,} tokens" if name == "max_tokens" else f"${estimate.cost_usd:.6f}"
                    raise SpendRefused(
                        f"{BUDGET_REACHED}: the judge call's estimated {amount} would take the run past "
                        f"its budget ({name} {limit:g})",
                        budget=True,
                        limit=name,
                    )
                await self._ended.wait()  # a call or a test in flight ends: look again
            tab.reserved += estimate
        finally:
            tab.waiting -= 1
            if not tab.waiting and any(t.waiting for t in self._tabs):
                self.changed()  # the calls of later tests held back behind this one look again

    def changed(self) -> None:
        """A tab's spend or reservations changed: whoever waits looks again."""
        ended, self._ended = self._ended, asyncio.Event()
        ended.set()

    # -- tests ending ------------------------------------------------------------------------------
    def charge(self, result: TestResult, tab: Tab | None = None) -> None:
        """Count a finished test's spend (its `admit` slot and its tab end). What its tab counted
        wins where it is more: a judge call whose verdict was lost (a later call of the same
        verdict refused) still spent."""
        cost = result.cost_usd
        judge = result.judge_cost_usd
        tokens = result.usage.total_tokens + result.judge_usage.total_tokens
        if result.run is not None and result.run.replayed:  # a replayed agent run spent nothing now
            cost, tokens = judge, result.judge_usage.total_tokens
        if tab is not None:
            counted = tab.counted
            cost = None if cost is None else max(cost, counted.cost_usd)
            judge = None if judge is None else max(judge, counted.judge_usd)
            tokens = max(tokens, counted.tokens)
            if tab.most_run.cost_usd > self._most_run.cost_usd or tab.most_run.tokens > self._most_run.tokens:
                self._most_run = Spend(
                    max(self._most_run.cost_usd, tab.most_run.cost_usd),
                    0.0,
                    max(self._most_run.tokens, tab.most_run.tokens),
                )
        self.cache_hits += sum(1 for s in result.signals if s.kind == "judge" and s.cached)
        replayed = result.run is not None and result.run.replayed
        unreported = result.usage.unreported and not replayed
        if self.settings.counts_cost and (cost is None or judge is None) and self.reached is None:
            # spend that cannot be priced cannot be held to a budget: stop rather than guess zero
            if unreported and cost is None:
                why = unknown_cost(result.usage)
            else:
                models = sorted({m for m in (result.usage.model, result.judge_usage.model) if m})
                why = f"no price for {', '.join(models) or 'a model'}"
            self.reached = f"{COST_UNKNOWN}: {why} (test {result.test_id})"
        if self.settings.max_tokens is not None and unreported and self.reached is None:
            # tokens nobody counted cannot be held to a token budget either
            self.reached = f"{TOKENS_UNKNOWN}: {unknown_cost(result.usage)} (test {result.test_id})"
        self.cost += cost or 0.0
        self.judge_cost += judge or 0.0
        self.tokens += tokens
        self._finished += 1
        self._most = (
            max(self._most[0], cost or 0.0),
            max(self._most[1], judge or 0.0),
            max(self._most[2], tokens),
        )
        self.release(tab)

    def release(self, tab: Tab | None = None) -> None:
        """A test admitted ended without a result to charge (cancelled), or was charged."""
        self._in_flight = max(0, self._in_flight - 1)
        if tab is not None:
            self._tabs.pop(tab, None)
        self.changed()

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
