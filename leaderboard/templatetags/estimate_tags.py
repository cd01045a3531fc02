"""How estimated speeds read: as rough as they are (two or three significant figures)."""

from __future__ import annotations

import math

from django import template

from leaderboard.templatetags.leaderboard_tags import DASH, num
from runs.estimates import Estimate

register = template.Library()


@register.filter
def rough(value: float | None) -> str:
    """1,234 · 56 · 7.8 · 0.45; a dash for a missing or unbounded figure."""
    if value is None or not math.isfinite(value) or value <= 0:
        return DASH
    digits = 0 if value >= 10 else (1 if value >= 1 else 2)
    return num(value, digits)


@register.filter
def bounded(found: Estimate | None) -> bool:
    """Whether an estimate's 80% interval has both ends (it has none below nine lanes)."""
    return found is not None and found.low > 0 and math.isfinite(found.high)


@register.filter
def percent(value: float | None, digits: int = 0) -> str:
    """A share (0.43) as a percentage ("43%")."""
    return DASH if value is None else f"{num(value * 100, digits)}%"
