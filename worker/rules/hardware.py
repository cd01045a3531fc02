"""A machine's GPUs as the v3 bundle and the site summarise them; detecting them is the
engine's (worker.engine.hardware)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def gpu_summary(hw: Mapping[str, Any]) -> tuple[str, float]:
    """v3 ``machine.gpu`` (names joined) and ``gpu_memory_gb`` (summed)."""
    names = [g.get("name", "") for g in hw.get("gpus", []) if g.get("name")]
    total = sum(g.get("vram_gb") or 0.0 for g in hw.get("gpus", []))
    return ", ".join(names), round(float(total), 2)
