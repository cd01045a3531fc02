"""Public pages, split by page family; healthz (and the bench baseline) are re-exported for
benchloop_site.urls."""

from __future__ import annotations

from leaderboard.views.health import bench_baseline, healthz

__all__ = ["bench_baseline", "healthz"]
