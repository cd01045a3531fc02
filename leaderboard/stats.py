"""Distribution summaries and the speed-noise test used by stack and compare pages (no Django).

The noise test is Welch's unequal-variance t-test, two-sided at α = 0.05, the same test the
`benchloop compare` CLI applies to two runs. Here it can work from summaries (mean, standard
deviation, count), because a stack with one run only has its run's sample summary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from worker.engine.stats import betainc, percentile

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


def two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


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
    """Welch's test from two summaries; None when either side has fewer than two values."""
    if n_a < 2 or n_b < 2:
        return None
    var_a, var_b = sd_a**2 / n_a, sd_b**2 / n_b
    if var_a + var_b == 0:
        same = mean_a == mean_b
        t = 0.0 if same else math.inf
        return NoiseTest(mean_a, mean_b, n_a, n_b, t, n_a + n_b - 2, 1.0 if same else 0.0, basis)
    t = (mean_b - mean_a) / math.sqrt(var_a + var_b)
    df = (var_a + var_b) ** 2 / (
        (var_a**2 / (n_a - 1) if var_a else 0.0) + (var_b**2 / (n_b - 1) if var_b else 0.0)
    )
    return NoiseTest(mean_a, mean_b, n_a, n_b, t, df, two_sided_p(t, df), basis)


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
