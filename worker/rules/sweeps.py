"""A sweep cell's status as a bundle records it (docs/metrics.md, "Depth and concurrency
sweeps"); the engine builds the cells (worker.engine.sweeps)."""

from __future__ import annotations

CELL_STATUSES = ("measured", "skipped", "failed")


def cell_status(metadata: object) -> str | None:
    """A sweep cell's status (measured, skipped or failed) from its task's metadata, or None."""
    cell = metadata.get("cell") if isinstance(metadata, dict) else None
    status = cell.get("status") if isinstance(cell, dict) else None
    return status if status in CELL_STATUSES else None
