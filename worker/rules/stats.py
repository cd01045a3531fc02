"""Small statistics kit: summaries with the median's interval, and Welch's t-test.

Written out here (no numpy/scipy) so the engine installs anywhere the CLI does. Every interval
the engine reports for a sample is the median's sign-test interval (``median_interval``): it
is drawn from the data, so a positive rate never gets a negative bound. Differences between
two runs are ratios, tested on the log scale (``ratio_test``). docs/metrics.md says why.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TypedDict, overload

from .contract import Summary


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (position (n-1)·q), like numpy's default."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


@overload
def median(
    values: Iterable[float | None],
    *,
    min_n: int = 1,
    digits: int | None = None,
    keep_infinite: bool = False,
) -> float | None: ...


@overload
def median(
    values: Iterable[float | None],
    *,
    min_n: int = 1,
    digits: int | None = None,
    keep_infinite: bool = False,
    default: float,
) -> float: ...


def median(
    values: Iterable[float | None],
    *,
    min_n: int = 1,
    digits: int | None = None,
    keep_infinite: bool = False,
    default: float | None = None,
) -> float | None:
    """The one median: of the numbers among ``values`` (None and NaN dropped, and infinities
    too unless ``keep_infinite``, where an unbounded interval's width counts as the widest),
    the middle one, or halfway between the two middle ones for an even count (``percentile``
    at 0.5). ``default`` (None unless given) when fewer than ``min_n`` remain, and always when
    none do: a reported figure asks for MIN_MEDIAN_N. ``digits`` rounds the result."""
    clean = sorted(
        float(v)
        for v in values
        if v is not None and (math.isfinite(v) or (keep_infinite and not math.isnan(v)))
    )
    if not clean or len(clean) < min_n:
        return default
    low, high = clean[(len(clean) - 1) // 2], clean[len(clean) // 2]
    # Between two finite values this is percentile()'s interpolation, to the last bit.
    found = low + (high - low) * 0.5 if math.isfinite(low + high) else (low + high) / 2
    return found if digits is None else round(found, digits)


def summary_median(summary: object) -> float | None:
    """The median a bundle's summary block (``summarize``) holds, when it holds a number."""
    value = summary.get("median") if isinstance(summary, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def stdev(values: Sequence[float]) -> float:
    """Sample standard deviation (n-1); 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    m = mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (len(values) - 1))


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_ppf(q: float, df: float) -> float:
    """Inverse of ``t_cdf`` by bisection (plenty fast for a handful of calls)."""
    lo, hi = -1e4, 1e4
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _round4(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def summarize(values: Iterable[float | None], *, higher_is_better: bool = True) -> Summary:
    """Summary of a sample: median with its 95% interval, mean, sample stdev, p5/p95/p99, peak.

    ``median``, ``ci95_low`` and ``ci95_high`` come from ``median_interval``: null below
    MIN_MEDIAN_N values, and the interval is the sign-test one (``ci95_coverage`` says what it
    covers when the sample is too small for a full 95%). ``peak`` is the best single sample: the
    highest rate, or the lowest latency when ``higher_is_better`` is off.
    """
    clean = sorted(float(v) for v in values if v is not None and math.isfinite(v))
    n = len(clean)
    if n == 0:
        return Summary(
            n=0,
            median=None,
            mean=None,
            stdev=None,
            p5=None,
            p95=None,
            p99=None,
            ci95_low=None,
            ci95_high=None,
            ci95_coverage=None,
            peak=None,
        )
    interval = median_interval(clean)
    return Summary(
        n=n,
        median=_round4(interval["median"]),
        mean=_round4(mean(clean)),
        stdev=_round4(stdev(clean)),
        p5=_round4(percentile(clean, 0.05)),
        p95=_round4(percentile(clean, 0.95)),
        p99=_round4(percentile(clean, 0.99)),
        ci95_low=_round4(interval["low"]),
        ci95_high=_round4(interval["high"]),
        ci95_coverage=_round4(interval["coverage"]),
        peak=_round4(clean[-1] if higher_is_better else clean[0]),
    )


def two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


class Welch(TypedDict):
    t: float
    df: float
    p_value: float


def welch(
    mean_a: float, sd_a: float, n_a: int, mean_b: float, sd_b: float, n_b: int
) -> Welch | None:
    """Welch's unequal-variance t-test of B against A, two-sided, from each side's mean,
    sample standard deviation and count (a page may hold only summaries); ``None`` with under
    two values a side. The one Welch test: the CLI, the engine and the site's pages call it."""
    if n_a < 2 or n_b < 2:
        return None
    var_a, var_b = sd_a**2 / n_a, sd_b**2 / n_b
    if var_a + var_b == 0:
        same = mean_a == mean_b
        return Welch(t=0.0 if same else math.inf, df=n_a + n_b - 2, p_value=float(same))
    t = (mean_b - mean_a) / math.sqrt(var_a + var_b)
    df = (var_a + var_b) ** 2 / (
        (var_a**2 / (n_a - 1) if var_a else 0.0) + (var_b**2 / (n_b - 1) if var_b else 0.0)
    )
    return Welch(t=t, df=df, p_value=two_sided_p(t, df))


def welch_test(a: Sequence[float], b: Sequence[float]) -> Welch | None:
    """``welch`` on two samples, rounded for a bundle or the CLI."""
    found = welch(mean(a), stdev(a), len(a), mean(b), stdev(b), len(b)) if a and b else None
    if found is None:
        return None
    return Welch(
        t=round(found["t"], 4),
        df=round(found["df"], 2),
        p_value=round(max(found["p_value"], 0.0), 6),
    )


# A median (and its interval) needs at least this many values; below it pages say "n too small".
MIN_MEDIAN_N = 3


class MedianInterval(TypedDict):
    n: int
    median: float | None
    low: float | None
    high: float | None
    coverage: float | None


def median_interval(values: Iterable[float | None], level: float = 0.95) -> MedianInterval:
    """The median of at least MIN_MEDIAN_N values with a distribution-free interval for it.

    The interval runs between two order statistics of the sample (the sign-test interval), so
    it stays inside the data: never negative for a positive quantity, and in the data's units
    on any scale. With few values the widest interval (min to max) covers less than ``level``;
    ``coverage`` says what it does cover. Below MIN_MEDIAN_N values every figure is None.
    """
    clean = sorted(float(v) for v in values if v is not None and math.isfinite(v))
    n = len(clean)
    if n < MIN_MEDIAN_N:
        return MedianInterval(n=n, median=None, low=None, high=None, coverage=None)

    # The interval [x(j), x(n-1-j)] (0-based) misses the median with probability
    # 2·P(Bin(n, 1/2) <= j): take the widest j whose miss stays within 1 - level, else min-max.
    # The binomial tail is summed once, term by term, in exact integers (a lane can hold
    # thousands of runs: recomputing each tail made this quadratic in n).
    total = 2**n
    term = 1  # C(n, 0)
    tail = 1  # sum of C(n, i) for i <= j
    j = 0
    while j + 1 < n - 2 - j:
        term = term * (n - j) // (j + 1)  # C(n, j + 1)
        if 2 * (tail + term) / total > 1 - level:
            break
        tail += term
        j += 1
    k, miss = j, 2 * tail / total
    return MedianInterval(
        n=n,
        median=median(clean),
        low=clean[k],
        high=clean[n - 1 - k],
        coverage=round(1 - miss, 4),
    )


class RatioTest(TypedDict):
    """B ÷ A with its interval and p-value (None without a pair to test), the pairs used, and
    the values on each side."""

    ratio: float
    low: float | None
    high: float | None
    p_value: float | None
    df: float | None
    groups: int
    n_a: int
    n_b: int


def ratio_test(
    a_groups: Sequence[Sequence[float | None]],
    b_groups: Sequence[Sequence[float | None]],
    level: float = 0.95,
) -> RatioTest | None:
    """B ÷ A for a positive quantity measured in matching groups (one task in both runs).

    Each pair of groups gives the difference of its mean logs, and the pairs count equally, so
    the estimate is the typical ratio over the shared tasks whatever their trial counts. The
    variance is Welch's (s²/n on each side) summed over the pairs, with Welch–Satterthwaite
    degrees of freedom; the interval and the two-sided p-value are that t statistic's,
    back-transformed, so a ratio's interval is always positive. Pairs with two or more values a
    side are tested; with none, the ratio comes without interval or p-value. ``None`` when no
    pair has a positive value on both sides.
    """
    pairs = []
    for a, b in zip(a_groups, b_groups, strict=True):
        la = [math.log(v) for v in a if v is not None and math.isfinite(v) and v > 0]
        lb = [math.log(v) for v in b if v is not None and math.isfinite(v) and v > 0]
        if la and lb:
            pairs.append((la, lb))
    if not pairs:
        return None
    testable = [(la, lb) for la, lb in pairs if len(la) >= 2 and len(lb) >= 2]
    used = testable or pairs
    k = len(used)
    diff = math.fsum(mean(lb) - mean(la) for la, lb in used) / k
    out = RatioTest(
        ratio=round(math.exp(diff), 4),
        low=None,
        high=None,
        p_value=None,
        df=None,
        groups=k,
        n_a=sum(len(la) for la, _ in used),
        n_b=sum(len(lb) for _, lb in used),
    )
    if not testable:
        return out
    parts = [stdev(side) ** 2 / len(side) for la, lb in used for side in (la, lb)]
    var = math.fsum(parts) / k**2
    if var == 0:
        out["low"] = out["high"] = out["ratio"]
        out["p_value"] = 1.0 if diff == 0 else 0.0
        out["df"] = float(sum(len(la) + len(lb) - 2 for la, lb in used))
        return out
    sides = [side for la, lb in used for side in (la, lb)]
    df = math.fsum(parts) ** 2 / math.fsum(
        (p**2) / (len(side) - 1) for p, side in zip(parts, sides, strict=True) if p
    )
    se = math.sqrt(var)
    half = t_ppf(0.5 + level / 2, df) * se
    t = diff / se
    p = 2.0 * (1.0 - t_cdf(abs(t), df))
    out["low"] = round(math.exp(diff - half), 4)
    out["high"] = round(math.exp(diff + half), 4)
    out["p_value"] = round(max(p, 0.0), 6)
    out["df"] = round(df, 2)
    return out
