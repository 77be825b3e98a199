"""Readable numbers in the pipeline's tables."""

from __future__ import annotations

from agent_health.pipeline import ms, percent, sig


def test_numbers_are_rounded_for_reading():
    assert sig(0.33333333333333337) == 0.3333
    assert sig(-217.44117399987317) == -217.4
    assert sig(0.000659312) == 0.0006593
    assert sig(None) is None and sig(0.0) == 0.0
    assert percent(2 / 3) == 66.7 and percent(None) is None
    assert ms(12.3456) == 12.3 and str(ms(-0.04)) == "0.0"
