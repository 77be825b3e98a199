"""Estimated cost of model calls, in USD.

Where a price comes from, first match wins:

1. the project's override table (`prices={"model id": (USD per 1M input, USD per 1M output)}` in the
   configuration), matched on the exact model id (case-insensitive);
2. the demo agent's and demo judge's nominal prices (`DEMO_PRICES`, so the demo shows a cost);
3. `genai-prices`, the maintained price database, from the snapshot bundled with the installed
   package (it never goes online here). A Bedrock model id (`anthropic.claude-...`,
   `us.amazon.nova-...`) is looked up among AWS Bedrock's prices.

A model none of them knows is unknown: its cost is None, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agent_health.lazy import deferred
from agent_health.model import Usage

# the price database loads for the first model that no price table names
if TYPE_CHECKING:
    import genai_prices as genai_prices
else:
    genai_prices = deferred("genai_prices")


PriceTable = Mapping[str, tuple[float, float]]

DEMO_PRICES: dict[str, tuple[float, float]] = {
    "demo-sre-small": (0.25, 1.25),
    "demo-sre-large": (3.00, 15.00),
    "demo-heuristic": (0.0, 0.0),
}

# Bedrock's model ids are `<vendor>.<model>`, optionally behind a cross-region profile (`us.`, `eu.`, ...).
_BEDROCK_ID = re.compile(
    r"^(?:(?:us|eu|apac|au|ca|jp|us-gov|global)\.)?"
    r"(?:anthropic|amazon|meta|mistral|cohere|ai21|deepseek|writer|qwen|openai|twelvelabs|stability)\.",
    re.I,
)


def _override(model: str, table: PriceTable | None) -> tuple[float, float] | None:
    if not table:
        return None
    if model in table:
        return table[model]
    low = model.lower()
    return next((price for name, price in table.items() if name.lower() == low), None)


@lru_cache(maxsize=1024)
def _library_provider(model: str) -> tuple[bool, str | None]:
    """(found, provider id to ask) for `model` in genai-prices; misses are remembered too."""
    attempts: list[str | None] = ["aws", None] if _BEDROCK_ID.match(model) else [None]
    for provider_id in attempts:
        try:
            genai_prices.calc_price(genai_prices.Usage(input_tokens=0, output_tokens=0), model, provider_id=provider_id)
        except LookupError:
            continue
        return True, provider_id
    return False, None


def _library_price(model: str, input_tokens: int, output_tokens: int) -> Any | None:
    """genai-prices' PriceCalculation for the tokens, or None when it has no price for `model`."""
    found, provider_id = _library_provider(model)
    if not found:
        return None
    return genai_prices.calc_price(
        genai_prices.Usage(input_tokens=input_tokens, output_tokens=output_tokens), model, provider_id=provider_id
    )


def call_cost(
    model: str | None, input_tokens: int, output_tokens: int, table: PriceTable | None = None
) -> float | None:
    """The cost of one model call (or of calls to one model), or None when the model has no price.

    No tokens cost nothing, whatever the model.
    """
    if not input_tokens and not output_tokens:
        return 0.0
    if not model:
        return None
    rates = _override(model, table) or DEMO_PRICES.get(model)
    if rates is not None:
        return round((input_tokens * rates[0] + output_tokens * rates[1]) / 1_000_000, 8)
    price = _library_price(model, input_tokens, output_tokens)
    return None if price is None else round(float(price.total_price), 8)


def cost_of(usage: Usage, table: PriceTable | None = None) -> float | None:
    """The cost of one usage record (one model), or None when it has tokens and no known price.
    A cost the agent reported itself wins: it knows its own cache and pricing better than a table."""
    if usage.cost_usd is not None:
        return usage.cost_usd
    if usage.unreported:  # an agent that said nothing of its usage: unknown, never free
        return None
    return call_cost(usage.model, usage.input_tokens, usage.output_tokens, table)


def total_cost(usages: Iterable[Usage], table: PriceTable | None = None) -> float | None:
    """The summed cost of several usage records (e.g. a run's agent usage and each judge call's).

    Unknown as soon as one record with tokens has no price: a partial sum would understate the cost.
    """
    total = 0.0
    for usage in usages:
        cost = cost_of(usage, table)
        if cost is None:
            return None
        total += cost
    return round(total, 8)


def price_source(model: str | None, table: PriceTable | None = None) -> dict[str, Any] | None:
    """Where `model`'s price comes from: {"source": "override" | "demo" | "genai-prices", ...}; None if unknown."""
    if not model:
        return None
    if _override(model, table) is not None:
        return {"source": "override", "model": model}
    if model in DEMO_PRICES:
        return {"source": "demo", "model": model}
    price = _library_price(model, 0, 0)
    if price is None:
        return None
    return {"source": "genai-prices", "provider": price.provider.id, "model": price.model.id}
