"""Estimated cost from a per-model price table (USD per 1M tokens: input, output).

The table is a snapshot of public list prices and of the demo agent's nominal prices; override or
extend it with `prices={...}` in the configuration. Unknown models cost nothing and are reported as
such (`cost_usd` stays None), never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_health.model import Usage

PRICES: dict[str, tuple[float, float]] = {
    # demo agent and judge (nominal, so the demo shows a cost)
    "demo-sre-small": (0.25, 1.25),
    "demo-sre-large": (3.00, 15.00),
    "demo-heuristic": (0.0, 0.0),
    # OpenAI
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "o3-mini": (1.10, 4.40),
    # Anthropic (also on Bedrock under anthropic.* ids)
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
    # Amazon
    "amazon.nova-micro": (0.035, 0.14),
    "amazon.nova-lite": (0.06, 0.24),
    "amazon.nova-pro": (0.80, 3.20),
}


def price_for(model: str | None, table: Mapping[str, tuple[float, float]] | None = None) -> tuple[float, float] | None:
    """Exact match first, then the longest known name contained in the model id
    (so 'us.anthropic.claude-3-5-sonnet-20241022-v2:0' prices as claude-3-5-sonnet)."""
    if not model:
        return None
    prices = {**PRICES, **(table or {})}
    if model in prices:
        return prices[model]
    low = model.lower()
    best = max((k for k in prices if k.lower() in low), key=len, default=None)
    return prices[best] if best else None


def cost_of(usage: Usage, table: Mapping[str, tuple[float, float]] | None = None) -> float | None:
    price = price_for(usage.model, table)
    if price is None:
        return None if usage.total_tokens else 0.0
    return round((usage.input_tokens * price[0] + usage.output_tokens * price[1]) / 1_000_000, 8)
