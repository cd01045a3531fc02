"""The median and its distribution-free interval (worker.rules.stats.median_interval)."""

from __future__ import annotations

import random

import pytest

from worker.rules.stats import (
    MIN_MEDIAN_N,
    median,
    median_interval,
    percentile,
    ratio_test,
    summary_median,
)


def test_the_one_median_drops_what_is_not_a_number_and_splits_an_even_count() -> None:
    """worker.rules.stats.median, the rule every median of the engine and the site follows."""
    assert median([3.0, None, 1.0, float("nan"), 2.0, float("inf")]) == 2.0
    assert median([4, 1, 3, 2]) == 2.5  # halfway between the two middle values
    assert median([]) is None and median([None]) is None
    assert median([5.0, 900.0]) == 452.5
    assert median([5.0, 900.0], min_n=MIN_MEDIAN_N) is None  # a reported figure needs three
    assert median([1.0, 2.0, 4.0], min_n=MIN_MEDIAN_N) == 2.0
    assert median([1.0, 2.0], digits=0) == 2.0 and median([0.123456], digits=4) == 0.1235
    values = [0.5, 0.6, 0.7, 40.0, 900.0, 0.55, 0.65]
    assert median(values) == median_interval(values)["median"]


def test_the_median_keeps_infinities_when_asked_and_gives_its_default_for_nothing() -> None:
    """An unbounded interval's width (inf) counts as the widest; a NaN never counts."""
    inf = float("inf")
    assert median([1.0, inf, inf], keep_infinite=True) == inf
    assert median([1.0, 2.0, inf], keep_infinite=True) == 2.0
    assert median([-inf, 3.0], keep_infinite=True) == -inf
    assert median([1.0, float("nan"), inf], keep_infinite=True) == inf
    assert median([1.0, inf]) == 1.0  # dropped without the flag
    assert median([], default=0.0) == 0.0 and median([None], default=-1.0) == -1.0
    assert median([2.0], default=0.0) == 2.0
    # Between finite values it is percentile()'s interpolation, to the last bit.
    rng = random.Random(7)
    for n in range(1, 30):
        values = [rng.uniform(-1e6, 1e6) for _ in range(n)]
        assert median(values) == percentile(sorted(values), 0.5)


def test_a_summary_median_is_a_number_or_nothing() -> None:
    assert summary_median({"median": 12.5, "n": 3}) == 12.5
    assert summary_median({"median": 7}) == 7.0
    for summary in ({"median": None}, {"median": True}, {"median": "9"}, {}, None, [1.0]):
        assert summary_median(summary) is None


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


def test_a_ratio_of_a_run_with_itself_is_one_and_not_significant() -> None:
    groups = [[60.1, 59.8, 60.4], [20.2, 19.9, 20.1, 20.3]]
    result = ratio_test(groups, groups)
    assert result["ratio"] == 1.0 and result["p_value"] == 1.0
    assert result["low"] < 1.0 < result["high"]
    assert (result["groups"], result["n_a"], result["n_b"]) == (2, 7, 7)


def test_the_ratio_is_typical_over_tasks_and_its_interval_is_always_positive() -> None:
    # B is exactly twice as fast on one task and exactly as fast on the other: the per-task
    # log ratios are ln 2 and 0, so the typical ratio is √2, whatever the trial counts.
    a = [[10.0, 10.0], [50.0, 50.0, 50.0]]
    b = [[20.0, 20.0, 20.0, 20.0], [50.0, 50.0]]
    result = ratio_test(a, b)
    assert result["ratio"] == pytest.approx(2**0.5, abs=1e-4)
    assert result["low"] == result["high"] == result["ratio"] and result["p_value"] == 0.0
    # Wildly spread positive samples: an interval on the raw scale would cross zero.
    spread = ratio_test([[0.5, 40.0, 900.0]], [[0.6, 30.0, 700.0]])
    assert 0 < spread["low"] < spread["ratio"] < spread["high"]
    assert spread["p_value"] > 0.5


def test_single_trials_give_a_ratio_without_an_interval() -> None:
    result = ratio_test([[10.0], [20.0]], [[12.0], [24.0]])
    assert result["ratio"] == pytest.approx(1.2)
    assert result["low"] is result["high"] is result["p_value"] is None
    assert ratio_test([[]], [[5.0]]) is None


def test_the_ratio_interval_covers_the_true_ratio_95_times_in_100() -> None:
    """Three tasks with different rates, lognormal noise, B truly 1.1× A: the intervals hold
    1.1 about 95% of the time, and equal runs are called different about 5% of the time."""
    rng = random.Random(20261202)
    rates = (25.0, 80.0, 300.0)

    def run(scale: float, n: int) -> list[list[float]]:
        return [[r * scale * rng.lognormvariate(0, 0.08) for _ in range(n)] for r in rates]

    trials = 2000
    covered = false_alarms = 0
    for _ in range(trials):
        faster = ratio_test(run(1.0, 5), run(1.1, 4))
        covered += faster["low"] <= 1.1 <= faster["high"]
        same = ratio_test(run(1.0, 5), run(1.0, 5))
        false_alarms += same["p_value"] < 0.05
    assert abs(covered / trials - 0.95) < 0.02, covered / trials
    assert abs(false_alarms / trials - 0.05) < 0.02, false_alarms / trials
