"""Figures of the harness matrix page as HTML (every value escaped by format_html)."""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from leaderboard.stats import Proportion

register = template.Library()
DASH = mark_safe('<span class="muted">—</span>')


@register.filter
def score(value: Proportion | None) -> str:
    """'60% (95% CI 31–83) · n = 10' as HTML."""
    if value is None:
        return DASH
    return format_html(
        '<span class="strong">{}%</span> <span class="ci">(95% CI {}–{})</span> '
        '<span class="n">n = {}</span>',
        f"{value.rate:.0f}",
        f"{value.low:.0f}",
        f"{value.high:.0f}",
        value.n,
    )


@register.filter
def score_text(value: Proportion | None) -> str:
    if value is None:
        return "—"
    return f"{value.rate:.0f}% (95% CI {value.low:.0f}–{value.high:.0f}, n = {value.n})"


@register.filter
def times(value: float | None) -> str:
    """A ratio to the baseline: '×1.8'."""
    if value is None:
        return "—"
    return f"×{value:.2f}" if value < 10 else f"×{value:.0f}"


@register.filter
def seconds(ms: float | None) -> str:
    if ms is None:
        return "—"
    return f"{ms / 1000:.1f} s" if ms < 600_000 else f"{ms / 60_000:.0f} min"


@register.filter
def tokens(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    return f"{value:,.0f}"
