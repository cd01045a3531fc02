"""How a lane's figures read on a page: a median with its 95% interval, or with "1 run" or
"2 runs" beside it where there is no interval yet (runs.figures)."""

from __future__ import annotations

from html import escape

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from leaderboard.charts import TrendLines
from leaderboard.sweeps import Figure
from runs.figures import Interval, runs_text

register = template.Library()


def _fmt(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


@register.filter
def ci(value: Interval | None, digits: int = 1) -> str:
    """'123.4 (95% CI 120.1–125.0)' as HTML, or '123.4 (2 runs)' below three runs."""
    if value is None or value.n == 0 or value.median is None:
        return mark_safe('<span class="muted">—</span>')
    if value.low is None or value.high is None:  # not value.has_interval, as mypy narrows it
        return format_html(
            '<span class="median-value">{}</span> <span class="ci few-runs"'
            ' title="an interval needs three runs">{}</span>',
            _fmt(value.median, digits),
            runs_text(value.n),
        )
    return format_html(
        '<span class="median-value">{}</span> <span class="ci">95% CI {}–{}</span>',
        _fmt(value.median, digits),
        _fmt(value.low, digits),
        _fmt(value.high, digits),
    )


@register.filter
def run_figure(value: Figure | None, digits: int = 1) -> str:
    """One run's figure (leaderboard.sweeps.Figure) as HTML: its median with a 95% interval
    and its n (trials or requests), or the mean where n is too small for a median."""
    # leaderboard.sweeps.figure keeps no figure without a median or a mean.
    if value is None or value.value is None:
        return mark_safe('<span class="muted">—</span>')
    n = f"n = {value.n}" if value.n is not None else "trials not published"
    if value.median is None:
        return format_html(
            '<span class="median-value">{}</span> <span class="ci">mean · {}</span>',
            _fmt(value.value, digits),  # the mean, as there is no median
            n,
        )
    if value.low is None or value.high is None:  # sweeps.figure sets both or neither
        return format_html(
            '<span class="median-value">{}</span> <span class="ci">median · {}</span>',
            _fmt(value.median, digits),
            n,
        )
    # With few trials the widest interval (min to max) covers less than 95%: say what it covers.
    level = f"{value.coverage:.0%}" if value.coverage else "95%"
    return format_html(
        '<span class="median-value">{}</span> <span class="ci">{} CI {}–{} · {}</span>',
        _fmt(value.median, digits),
        level,
        _fmt(value.low, digits),
        _fmt(value.high, digits),
        n,
    )


@register.filter
def ci_text(value: Interval | None, digits: int = 1) -> str:
    """The same as plain text (for titles, descriptions and share images)."""
    if value is None or value.n == 0 or value.median is None:
        return "—"
    if value.low is None or value.high is None:  # not value.has_interval, as mypy narrows it
        return f"{_fmt(value.median, digits)} ({runs_text(value.n)})"
    low, high = _fmt(value.low, digits), _fmt(value.high, digits)
    return f"{_fmt(value.median, digits)} (95% CI {low}–{high})"


@register.filter
def middle(text: object, length: int = 26) -> str:
    """Text cut to `length` characters in the middle: a stack's label is told from its
    neighbours' by its end ("· harness mini-swe"), so the end stays."""
    value = str(text)
    if len(value) <= length:
        return value
    tail = (length - 1) // 2
    return value[: length - 1 - tail].rstrip() + "…" + value[-tail:].lstrip()


@register.simple_tag
def trend_marks(chart: TrendLines) -> str:
    """Each line of a TrendLines chart: whiskers, the line, and a titled point per median
    (built here rather than in template loops: a chart of ten classes has many marks)."""
    out = []
    for line in chart.lines:
        marks = [f'<g class="line s{int(line.series)}">']
        for p in line.points:
            marks.append(
                f'<line class="whisker" x1="{p.x}" x2="{p.x}" y1="{p.low_y}" y2="{p.high_y}"/>'
            )
        marks.append(f'<path class="class-line" d="{escape(line.path)}" fill="none"/>')
        for p in line.points:
            runs = f"{p.n} run{'s' if p.n != 1 else ''}"
            title = f"{line.label}, {p.category}: median {p.value:,.1f} {chart.unit} ({runs})"
            marks.append(
                f'<circle class="pt" cx="{p.x}" cy="{p.y}" r="4.5"><title>{escape(title)}'
                "</title></circle>"
            )
        marks.append("</g>")
        out.append("".join(marks))
    return mark_safe("".join(out))
