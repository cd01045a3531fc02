"""A lane's figure: the median of its runs, with a 95% interval from three runs up.

One rule for every surface (the stored lanes, the run-filtered board, the stack, compare and
run pages, the API, exports and share images): a lane with one or two runs still has a
figure, its median, shown with "1 run" or "2 runs" beside it and no interval; from three runs
the figure carries the sign-test interval of worker.rules.stats.median_interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from worker.rules.stats import MIN_MEDIAN_N, median, median_interval


@dataclass(frozen=True)
class Interval:
    """n values' median, and its 95% interval when n is at least MIN_MEDIAN_N."""

    n: int
    median: float | None = None
    low: float | None = None
    high: float | None = None

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Interval:
        clean = sorted(float(v) for v in values if v is not None and math.isfinite(v))
        if not clean:
            return cls(0)
        if len(clean) < MIN_MEDIAN_N:
            return cls(len(clean), median(clean))
        found = median_interval(clean)
        return cls(found["n"], found["median"], found["low"], found["high"])

    @property
    def value(self) -> float | None:
        """The figure shown: the median."""
        return self.median

    @property
    def runs_text(self) -> str:
        return runs_text(self.n)

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def too_small(self) -> bool:
        """Too few values for an interval (the median is still the figure)."""
        return self.n < MIN_MEDIAN_N


def runs_text(n: int) -> str:
    """'1 run', '2 runs': what stands beside a figure that has no interval."""
    return f"{n} run{'' if n == 1 else 's'}"


def settled(n: int) -> bool:
    """Whether a lane of n runs ranks with the settled lanes (an interval, three runs or
    more); lanes of one or two runs rank after them (queries.lanes, rows.sort_rows)."""
    return n >= MIN_MEDIAN_N
