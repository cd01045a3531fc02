"""Distribution summaries and the speed-noise test used by stack and compare pages (no Django).

The noise test is Welch's unequal-variance t-test, two-sided at α = 0.05, the same test the
`benchloop compare` CLI applies to two runs. Here it can work from summaries (mean, standard
deviation, count), because a stack with one run only has its run's sample summary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from worker.rules import stats as engine_stats
from worker.rules.stats import percentile

ALPHA = 0.05


# One implementation of percentiles and the t distribution, shared with the engine and CLI.
quantile = percentile


@dataclass(frozen=True)
class Box:
    """Five-number summary plus mean and spread of one sample."""

    n: int
    low: float
    q1: float
    median: float
    q3: float
    high: float
    mean: float
    stdev: float


def box(values: Iterable[float | None]) -> Box | None:
    clean = sorted(float(v) for v in values if v is not None and math.isfinite(v))
    if not clean:
        return None
    n = len(clean)
    mean = math.fsum(clean) / n
    stdev = math.sqrt(math.fsum((v - mean) ** 2 for v in clean) / (n - 1)) if n > 1 else 0.0
    return Box(
        n=n,
        low=clean[0],
        q1=quantile(clean, 0.25),
        median=quantile(clean, 0.5),
        q3=quantile(clean, 0.75),
        high=clean[-1],
        mean=mean,
        stdev=stdev,
    )


@dataclass(frozen=True)
class NoiseTest:
    """Welch's t-test of B against A on decode tok/s."""

    mean_a: float
    mean_b: float
    n_a: int
    n_b: int
    t: float
    df: float
    p_value: float
    basis: str  # "runs": per-run medians; "samples": one run's trial summary per side

    @property
    def significant(self) -> bool:
        return self.p_value < ALPHA

    @property
    def change_percent(self) -> float | None:
        if not self.mean_a:
            return None
        return 100.0 * (self.mean_b - self.mean_a) / self.mean_a


def welch(
    mean_a: float, sd_a: float, n_a: int, mean_b: float, sd_b: float, n_b: int, *, basis: str
) -> NoiseTest | None:
    """worker.rules.stats.welch as a NoiseTest; None when either side has under two values."""
    found = engine_stats.welch(mean_a, sd_a, n_a, mean_b, sd_b, n_b)
    if found is None:
        return None
    return NoiseTest(
        mean_a, mean_b, n_a, n_b, found["t"], found["df"], found["p_value"], basis=basis
    )


def welch_samples(a: Sequence[float], b: Sequence[float], *, basis: str) -> NoiseTest | None:
    box_a, box_b = box(a), box(b)
    if box_a is None or box_b is None:
        return None
    return welch(box_a.mean, box_a.stdev, box_a.n, box_b.mean, box_b.stdev, box_b.n, basis=basis)


def pareto_front(points: Sequence[tuple[float, float]]) -> set[int]:
    """Indexes of points no other point beats on both axes (both higher is better)."""
    order = sorted(range(len(points)), key=lambda i: (-points[i][0], -points[i][1]))
    front: set[int] = set()
    best_y = -math.inf
    for index in order:
        if points[index][1] > best_y:
            front.add(index)
            best_y = points[index][1]
    return front


@dataclass(frozen=True)
class Proportion:
    """A pass rate in percent with its 95% interval (Wilson's score interval), over n tries."""

    passed: int
    n: int
    rate: float
    low: float
    high: float

    def overlaps(self, other: Proportion) -> bool:
        return self.low <= other.high and other.low <= self.high


def wilson(passed: int, n: int, z: float = 1.959964) -> Proportion | None:
    """Wilson's score interval for `passed` of `n` tries, in percent; None for no tries.

    It stays inside 0–100 and is honest at the ends (0 of 5 is not "0 ± 0"), which the normal
    approximation is not: matrix cells hold a handful of tasks each."""
    if n <= 0:
        return None
    passed = max(0, min(passed, n))
    p = passed / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return Proportion(
        passed=passed,
        n=n,
        rate=100.0 * p,
        low=100.0 * max(0.0, centre - half),
        high=100.0 * min(1.0, centre + half),
    )
