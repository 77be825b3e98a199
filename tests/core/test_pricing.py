"""Model prices: genai-prices is the source, the configuration's table wins, unknown stays unknown."""

from __future__ import annotations

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from agent_health.model import Usage
from agent_health.pricing import DEMO_PRICES, call_cost, cost_of, price_source, total_cost

CURRENT_MODELS = ["gpt-4.1-nano", "gpt-4o-2024-05-13", "claude-opus-4-5", "gpt-5", "o3", "o4-mini", "claude-haiku-4-5"]


def library_cost(model: str, i: int, o: int, **kw) -> float:
    return round(float(calc_price(PriceUsage(input_tokens=i, output_tokens=o), model, **kw).total_price), 8)


@pytest.mark.parametrize("model", CURRENT_MODELS)
def test_current_models_cost_what_the_library_says(model):
    cost = cost_of(Usage.of(123_456, 7_890, model=model))
    assert cost is not None and cost > 0
    assert cost == library_cost(model, 123_456, 7_890)
    assert price_source(model) == {
        "source": "genai-prices",
        "provider": price_source(model)["provider"],
        "model": model,
    }


def test_no_substring_guessing_between_model_families():
    # the old table priced gpt-4.1-nano as gpt-4.1 and gpt-4o-2024-05-13 as gpt-4o
    tokens = (1_000_000, 1_000_000)
    assert call_cost("gpt-4.1-nano", *tokens) != call_cost("gpt-4.1", *tokens)
    assert call_cost("gpt-4o-2024-05-13", *tokens) != call_cost("gpt-4o", *tokens)
    assert call_cost("claude-opus-4-5", *tokens) != call_cost("claude-opus-4", *tokens)


def test_bedrock_ids_are_priced_from_aws_prices():
    for model in ("anthropic.claude-3-5-haiku-20241022-v1:0", "us.anthropic.claude-3-5-sonnet-20241022-v2:0"):
        assert call_cost(model, 5000, 700) == library_cost(model, 5000, 700, provider_id="aws")
        assert price_source(model)["provider"] == "aws"


def test_the_configured_table_wins_over_the_library_and_the_demo_prices():
    table = {"GPT-5": (1.0, 2.0), "demo-sre-large": (0.0, 0.0)}
    assert call_cost("gpt-5", 1_000_000, 1_000_000, table) == 3.0  # exact id, any case
    assert call_cost("gpt-5", 1_000_000, 1_000_000) != 3.0
    assert call_cost("demo-sre-large", 1000, 1000, table) == 0.0
    assert price_source("gpt-5", table) == {"source": "override", "model": "gpt-5"}
    # an override is never matched as a substring of a longer id
    assert call_cost("gpt-5-mini", 1_000_000, 1_000_000, table) != 3.0


def test_demo_models_keep_their_nominal_prices():
    rates = DEMO_PRICES["demo-sre-small"]
    assert call_cost("demo-sre-small", 1_000_000, 2_000_000) == rates[0] + 2 * rates[1]


@pytest.mark.parametrize("model", ["my-private-finetune", "claude-opus-99", None])
def test_unknown_model_is_unknown_never_guessed(model):
    assert cost_of(Usage.of(1000, 100, model=model)) is None
    assert price_source(model) is None
    assert cost_of(Usage(model=model)) == 0.0  # no tokens cost nothing


def test_a_total_with_one_unknown_part_is_unknown():
    known, unknown = Usage.of(1000, 100, model="gpt-5"), Usage.of(10, 10, model="my-private-finetune")
    assert total_cost([known, Usage(model="my-private-finetune")]) == cost_of(known)
    assert total_cost([known, unknown]) is None
    assert total_cost([]) == 0.0


def test_a_cost_the_agent_reported_wins_over_the_price_table_and_adds_up_honestly():
    reported = Usage.of(1000, 100, model="no-such-model-anywhere", cost_usd=0.02)
    assert cost_of(reported) == 0.02  # no price for the model, yet the agent said what it cost
    assert total_cost([reported, Usage()]) == 0.02
    assert (reported + Usage(model="x")).cost_usd == 0.02  # an empty usage adds nothing
    assert (reported + Usage.of(5, 5, model="m")).cost_usd is None  # tokens with no reported cost: unknown
    assert (reported + reported).cost_usd == 0.04 and (Usage() + Usage()).cost_usd is None
