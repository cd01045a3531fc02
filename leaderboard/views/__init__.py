"""Public pages, split by page family; healthz is re-exported for benchloop_site.urls."""

from __future__ import annotations

from leaderboard.views.health import healthz

__all__ = ["healthz"]
