"""The median and its distribution-free interval (worker.engine.stats.median_interval)."""

from __future__ import annotations

import random

from worker.engine.stats import MIN_MEDIAN_N, median_interval


def test_below_three_values_there_is_no_median() -> None:
    for values in ([], [5.0], [5.0, 900.0]):
        result = median_interval(values)
        assert result["n"] == len(values)
        assert result["median"] is result["low"] is result["high"] is None
    assert MIN_MEDIAN_N == 3


def test_the_interval_is_drawn_from_the_data_so_a_positive_rate_stays_positive() -> None:
    # Wildly spread positive rates: a mean ± t·s/√n interval would dip below zero here.
    values = [0.5, 0.6, 0.7, 40.0, 900.0, 0.55, 0.65]
    result = median_interval(values)
    assert result["median"] == 0.65
    assert 0 < result["low"] <= result["median"] <= result["high"]
    assert {result["low"], result["high"]} <= set(values)


def test_the_stated_coverage_is_what_it_covers() -> None:
    """Drawn from a skewed distribution whose median is 1: the share of intervals holding 1
    matches the coverage each states (exactly min–max at n = 3, 75%)."""
    rng = random.Random(20261201)
    for n in (3, 5, 10, 40):
        stated = median_interval(range(n))["coverage"]
        trials = 3000
        hits = 0
        for _ in range(trials):
            result = median_interval([rng.lognormvariate(0, 1.5) for _ in range(n)])
            hits += result["low"] <= 1.0 <= result["high"]
        assert abs(hits / trials - stated) < 0.025, (n, hits / trials, stated)
        assert stated >= 0.95 or n < 6
