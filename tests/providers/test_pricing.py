"""Prices, the cost of a reply's usage, worst cases and the chars/4 estimate (pure functions)."""

from __future__ import annotations

import pytest

from evalnb.providers import normalise_usage
from evalnb.providers.pricing import call_cost, check_price, estimate_tokens, worst_case_cost


def test_check_price_normalises_and_names_what_is_wrong():
    assert check_price({"input": 1, "output": 2}) == {"input": 1.0, "output": 2.0}
    assert check_price({"input": 0, "output": 0, "cached_input": 0.25})["cached_input"] == 0.25
    assert check_price(None) is None
    with pytest.raises(ValueError, match=r"price\['output'\] must be a finite number >= 0"):
        check_price({"input": 1, "output": -0.5})
    with pytest.raises(ValueError, match="unknown key.*cache"):
        check_price({"input": 1, "output": 1, "cache": 1})
    with pytest.raises(ValueError, match="missing input and output"):
        check_price({"cached_input": 1})


def test_call_cost_bills_cached_input_tokens_at_their_own_price():
    price = {"input": 2.0, "output": 8.0, "cached_input": 0.5}
    usage = {"input_tokens": 1_000, "output_tokens": 500, "cached_input_tokens": 600}
    assert call_cost(usage, price) == pytest.approx((400 * 2 + 600 * 0.5 + 500 * 8) / 1e6)
    # no cached price: cached tokens cost the input price
    assert call_cost(usage, {"input": 2.0, "output": 8.0}) == pytest.approx((1000 * 2 + 500 * 8) / 1e6)
    # a cached count above the input count is capped (a server bug must not make a call cheaper than free)
    assert call_cost({"input_tokens": 10, "output_tokens": 0, "cached_input_tokens": 50}, price) == pytest.approx(5e-6)
    assert call_cost(usage, None) is None and call_cost(None, price) == 0.0


def test_usage_of_both_apis_keeps_cached_tokens():
    responses = {"input_tokens": 100, "output_tokens": 7, "input_tokens_details": {"cached_tokens": 64}}
    chat = {"prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 64}}
    expected = {"input_tokens": 100, "output_tokens": 7, "total_tokens": 107, "cached_input_tokens": 64}
    assert normalise_usage(responses) == expected == normalise_usage(chat)
    assert normalise_usage(expected) == expected  # already normalised (chat replies translated to Responses)
    assert "cached_input_tokens" not in normalise_usage({"prompt_tokens": 3, "completion_tokens": 1})


def test_worst_case_and_estimate():
    assert estimate_tokens("") == 0 and estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2
    assert worst_case_cost(100, 50, {"input": 1.0, "output": 4.0}) == pytest.approx((100 + 200) / 1e6)
    assert worst_case_cost(100, None, {"input": 1.0, "output": 4.0}) == pytest.approx(100 / 1e6)
    assert worst_case_cost(100, 50, None) == 0.0
