"""Holding a model call's estimated cost against the run's budget and the test's cap before the
call is made (docs/budgets.md).

The engine gives each test it runs a `Tab` (its spend while it runs, over every epoch) and makes it
the running code's tab (`use_tab`). Before each judge model call, the chat client asks the tab to
`hold` the call's estimate: its input tokens estimated from the prompt's size (`estimate_tokens`),
its output tokens at the judge's max output tokens setting, priced from the price table. A call
whose estimate fits the test's cap and the run's budget is reserved and made, and its reservation
is replaced by what its usage counted (`Held.settle`); a call that does not fit raises
`SpendRefused` and is not made. With no tab (no budget, no cap) nothing is held.

The run's side (the spend so far, the estimates of calls in flight, waiting for them) is the
`Pool` the engine's budget implements; this module is below the judges and the connectors so both
can reach it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Protocol

from agent_health.model import Usage
from agent_health.pricing import call_cost, cost_of

# The conservative rule for a prompt's tokens, with no tokenizer among the dependencies: one token
# per 3 bytes of UTF-8. English text runs at about 4 characters a token in the common BPE
# tokenizers, and a 3-byte character (CJK) is about one token, so this counts more than them.
BYTES_PER_TOKEN = 3
# An answer's tokens when the judge sets no max output tokens (an `openai` judge without
# `max_tokens`): the bound is then an assumption, not a limit (Bedrock's default maxTokens).
ASSUMED_OUTPUT_TOKENS = 1024


def unknown_cost(usage: Usage, model: str = "a model") -> str:
    """Why `usage` has no cost: the agent reported no usage at all, or its model has no price."""
    if usage.unreported:
        return f"the agent{f' ({usage.model})' if usage.model else ''} reported no usage"
    return f"no price for {usage.model or model}"


def estimate_tokens(text: str) -> int:
    """The tokens `text` counts as before a call: its UTF-8 bytes / `BYTES_PER_TOKEN`, rounded up."""
    return math.ceil(len(text.encode("utf-8", "surrogatepass")) / BYTES_PER_TOKEN)


@dataclass(frozen=True)
class Spend:
    """An amount against the limits: cost (agent and judge), the judges' part of it, tokens."""

    cost_usd: float = 0.0
    judge_usd: float = 0.0
    tokens: int = 0

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.cost_usd + other.cost_usd, self.judge_usd + other.judge_usd, self.tokens + other.tokens)

    def __sub__(self, other: Spend) -> Spend:
        return Spend(self.cost_usd - other.cost_usd, self.judge_usd - other.judge_usd, self.tokens - other.tokens)

    def __bool__(self) -> bool:
        return bool(self.cost_usd or self.judge_usd or self.tokens)


NOTHING = Spend()


class SpendRefused(Exception):
    """A model call that was not made: its estimate would pass the run's budget (`budget`) or the
    test's cap. The message names the estimate and the limit."""

    def __init__(self, message: str, *, budget: bool, limit: str):
        super().__init__(message)
        self.budget = budget
        self.limit = limit  # the limit's name ("max_cost_usd", ...), or "max_cost_usd of the test"


class Pool(Protocol):
    """The run's budget as a call sees it (`agent_health.engine.budget.Budget`)."""

    async def reserve(self, tab: Tab, estimate: Spend, unpriced: str | None = None) -> None:
        """Reserve `estimate` on `tab` once it fits the budget (waiting for calls in flight while
        they might make room); raise `SpendRefused` when it cannot fit. `unpriced` names the
        call's model when it has no price (its estimate's cost is then unknown)."""

    def changed(self) -> None:
        """A tab's spend or reservations changed: calls waiting look again."""


class Tab:
    """One test's spend while it runs: what its agent runs and judge calls counted, and the
    estimates of its calls in flight; against its cap (`@test(max_cost_usd=...)`) and the run's
    `pool` (None without a budget)."""

    def __init__(
        self,
        test_id: str,
        *,
        cap_usd: float | None = None,
        prices: Mapping[str, tuple[float, float]] | None = None,
        pool: Pool | None = None,
    ):
        self.test_id = test_id
        self.cap_usd = cap_usd
        self.prices = dict(prices or {})
        self.pool = pool
        self.counted = NOTHING  # counted from usage: agent runs and judge calls, every epoch
        self.reserved = NOTHING  # estimates of its calls in flight
        self.waiting = 0  # its calls waiting for room in the budget
        self.run_pending = True  # the current trial's agent run is not counted yet
        self.most_run = NOTHING  # the most one of its agent runs spent
        self.unknown: str | None = None  # why its cost is unknown: "no price for X", or no usage reported
        self.unreported = False  # an agent run of it reported no usage: its tokens are unknown too
        self.refused: SpendRefused | None = None  # the first call it was refused

    def count_agent(self, usage: Usage, *, replayed: bool = False) -> None:
        """The trial's agent run returned: count its usage (a replayed run spent nothing now)."""
        self.run_pending = False
        if replayed:
            self._changed()
            return
        cost = cost_of(usage, self.prices)
        if cost is None:
            self.unknown = self.unknown or unknown_cost(usage, "the agent's model")
        self.unreported = self.unreported or usage.unreported
        run = Spend(cost or 0.0, 0.0, usage.total_tokens)
        self.counted += run
        self.most_run = Spend(max(self.most_run.cost_usd, run.cost_usd), 0.0, max(self.most_run.tokens, run.tokens))
        self._changed()

    def trial(self, starting: bool) -> None:
        """A trial starts (its agent run is pending) or ends (no agent run is pending any more)."""
        self.run_pending = starting
        self._changed()

    def estimate(self, model: str | None, input_tokens: int, output_tokens: int) -> tuple[Spend, bool]:
        """A judge call's estimate, and whether its model has a price."""
        cost = call_cost(model, input_tokens, output_tokens, self.prices)
        return Spend(cost or 0.0, cost or 0.0, input_tokens + output_tokens), cost is not None

    async def hold(self, model: str | None, input_tokens: int, output_tokens: int) -> Held:
        """Reserve a judge call's estimate, or raise `SpendRefused` (the call must not be made)."""
        estimate, priced = self.estimate(model, input_tokens, output_tokens)
        try:
            self._check_cap(model, estimate, priced)
            if self.pool is not None:
                await self.pool.reserve(self, estimate, None if priced else model or "the judge's model")
            else:
                self.reserved += estimate
        except SpendRefused as exc:
            self.refused = self.refused or exc
            raise
        return Held(self, model, estimate)

    def _check_cap(self, model: str | None, estimate: Spend, priced: bool) -> None:
        cap = self.cap_usd
        if cap is None:
            return
        if not priced or self.unknown:
            why = self.unknown or f"no price for {model}"
            raise SpendRefused(
                f"cost unknown against the test's cap of ${cap:g}: {why}"
                + (" (add it to the configuration's prices)" if why.startswith("no price") else ""),
                budget=False,
                limit="max_cost_usd of the test",
            )
        so_far = self.counted.cost_usd + self.reserved.cost_usd
        if so_far + estimate.cost_usd > cap:
            raise SpendRefused(
                f"the judge call's estimated cost ${estimate.cost_usd:.6f} would take the test's cost "
                f"${so_far:.6f} past its cap of ${cap:g}",
                budget=False,
                limit="max_cost_usd of the test",
            )

    def _changed(self) -> None:
        if self.pool is not None:
            self.pool.changed()


class Held:
    """A call's reservation: `settle` it with the call's usage once it returned, or `release` it
    when the call failed (nothing counted)."""

    def __init__(self, tab: Tab, model: str | None, estimate: Spend):
        self.tab, self.model, self.estimate = tab, model, estimate
        self._open = True

    def settle(self, usage: Usage) -> None:
        """Replace the reservation with what the call's usage counts."""
        if not self._open:
            return
        self._open = False
        tab = self.tab
        tab.reserved -= self.estimate
        # priced at the model asked, as the verdict prices it (a server may name a dated variant)
        priced = usage.model_copy(update={"model": self.model or usage.model})
        cost = cost_of(priced, tab.prices)
        if cost is None:
            tab.unknown = tab.unknown or unknown_cost(priced, "the judge's model")
        tab.counted += Spend(cost or 0.0, cost or 0.0, usage.total_tokens)
        tab._changed()

    def release(self) -> None:
        """The call failed or was cancelled: drop the reservation."""
        if self._open:
            self._open = False
            self.tab.reserved -= self.estimate
            self.tab._changed()


_TAB: ContextVar[Tab | None] = ContextVar("agent_health_spend_tab", default=None)


class Meter:
    """The usage of the model calls made while it is the running code's meter (`metering`): what
    one judge() spent, also when its verdict is errored (an answer unusable after its repair, a
    tool loop that failed half-way): the calls were made, their tokens were paid."""

    def __init__(self) -> None:
        self.total = Usage()

    def add(self, usage: Usage) -> None:
        self.total = self.total + usage


_METER: ContextVar[Meter | None] = ContextVar("agent_health_spend_meter", default=None)


def metering() -> tuple[Meter, Token[Meter | None]]:
    """A new meter for the model calls the running code makes from now (`reset_meter` ends it)."""
    meter = Meter()
    return meter, _METER.set(meter)


def reset_meter(token: Token[Meter | None]) -> None:
    _METER.reset(token)


def metered(usage: Usage) -> None:
    """A model call returned with `usage`: count it on the running code's meter, if any."""
    meter = _METER.get()
    if meter is not None:
        meter.add(usage)


def current_tab() -> Tab | None:
    """The running test's tab, or None (no budget and no cap, or outside a test)."""
    return _TAB.get()


def use_tab(tab: Tab | None) -> Token[Tab | None]:
    """Make `tab` the running code's tab (the engine, around a trial)."""
    return _TAB.set(tab)


def reset_tab(token: Token[Tab | None]) -> None:
    _TAB.reset(token)


__all__ = [
    "ASSUMED_OUTPUT_TOKENS",
    "BYTES_PER_TOKEN",
    "Held",
    "Meter",
    "Pool",
    "Spend",
    "SpendRefused",
    "Tab",
    "current_tab",
    "estimate_tokens",
    "metered",
    "metering",
    "reset_meter",
    "reset_tab",
    "unknown_cost",
    "use_tab",
]
