"""Summary statistics for speed samples (no Django imports)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from worker.engine.stats import percentile

__all__ = ["percentile", "summarise"]


def summarise(values: Iterable[float | None], *, lower_is_better: bool = False) -> dict:
    """median, mean, stdev (sample; 0 below two values), p5, p95, peak and n of the values."""
    clean = sorted(v for v in values if v is not None)
    if not clean:
        return {
            "median": None,
            "mean": None,
            "stdev": None,
            "p5": None,
            "p95": None,
            "peak": None,
            "n": 0,
        }
    return {
        "median": statistics.median(clean),
        "mean": statistics.fmean(clean),
        "stdev": statistics.stdev(clean) if len(clean) > 1 else 0.0,
        "p5": percentile(clean, 0.05),
        "p95": percentile(clean, 0.95),
        "peak": clean[0] if lower_is_better else clean[-1],
        "n": len(clean),
    }
