"""Number formatting and query-string links for the leaderboard templates."""

from __future__ import annotations

from html import escape
from typing import SupportsFloat

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from leaderboard.charts import Scatter, StripRow
from leaderboard.filters import BACKEND_CHOICES, PARAM_CHOICES, BoardFilters, sort_spec
from leaderboard.rows import Figure, Row
from leaderboard.suite_columns import MISSING_TITLE
from runs import roofline
from runs.models import Stack

register = template.Library()
DASH = "—"


@register.filter
def num(value: SupportsFloat | str | None, digits: int = 1) -> str:
    """A number with fixed decimals and thousands separators, or a dash when missing."""
    if value is None or value == "":
        return DASH
    try:
        return f"{float(value):,.{int(digits)}f}"
    except (TypeError, ValueError):
        return DASH


@register.filter
def signed(value: float | None, digits: int = 1) -> str:
    """+1.2 / −1.2 (a true minus sign), or a dash when missing."""
    if value is None:
        return DASH
    text = f"{abs(float(value)):,.{int(digits)}f}"
    if round(float(value), int(digits)) == 0:
        return f"±{text}"
    return f"+{text}" if value > 0 else f"−{text}"


@register.filter
def absolute(value: float | None) -> float | None:
    return abs(value) if value is not None else None


@register.simple_tag
def board_qs(filters: BoardFilters, **changes: object) -> str:
    """The canonical query string of the view with some values changed ('' when empty)."""
    if changes and "page" not in changes:
        changes["page"] = 1
    query = filters.to_query(**changes)
    return f"?{query.urlencode()}" if query else ""


@register.simple_tag
def hardware_qs(filters: BoardFilters, hw: str) -> str:
    """The view on another hardware choice (a class slug, or "all"), other filters kept."""
    query = filters.with_hardware(hw).to_query()
    return f"?{query.urlencode()}" if query else ""


@register.simple_tag
def without_qs(filters: BoardFilters, name: str) -> str:
    query = filters.without(name)
    return f"?{query.urlencode()}" if query else ""


@register.inclusion_tag("leaderboard/_size_tabs.html")
def size_tabs(filters: BoardFilters, path: str) -> dict[str, object]:
    """Model-size tiers as tabs over the board (people shop by what fits), other filters kept."""
    return {
        "path": path,
        "current": filters.params,
        "any_qs": board_qs(filters, params=""),
        "tiers": [(key, label, board_qs(filters, params=key)) for key, label in PARAM_CHOICES],
    }


@register.filter
def backend_label(value: object) -> str:
    """'CUDA' for 'cuda'; an unknown backend as recorded (the template escapes it)."""
    return dict(BACKEND_CHOICES).get(str(value).lower(), str(value)[:20])


@register.filter
def moe_active(stack: Stack) -> str:
    """'MoE · 3B active' for a mixture-of-experts stack whose active size is known, else ''."""
    weights = roofline.model_weights(stack.model_id, stack.params_b)
    if weights is None or not weights.is_moe:
        return ""
    if not weights.active_known:
        return "MoE · active parameters unknown"
    return f"MoE · {weights.active_b:g}B active"


@register.inclusion_tag("leaderboard/_sort_th.html")
def sort_th(
    filters: BoardFilters, key: str, path: str, label: str = "", title: str = ""
) -> dict[str, object]:
    """A sortable column header: a real link, swapped in place by htmx when it is loaded."""
    column_label = label or sort_spec(key)[0]
    active = filters.sort_key == key
    natural_desc = sort_spec(key)[1]
    next_desc = not filters.descending if active else natural_desc
    direction = "desc" if next_desc else "asc"
    if direction == ("desc" if natural_desc else "asc"):
        direction = ""
    query = filters.to_query(sort=key, dir=direction, page=1)
    return {
        "href": path + (f"?{query.urlencode()}" if query else ""),
        "label": column_label,
        "title": title,
        "active": active,
        "aria_sort": ("descending" if filters.descending else "ascending") if active else "",
        "numeric": key not in ("model", "quant", "engine", "hardware"),
    }


@register.simple_tag
def figure(value: Figure | None, digits: int = 1) -> str:
    """A row's figure (leaderboard.rows.Figure): the median with its 95% interval under it, or,
    for a lane of one or two runs, the median with "1 run" or "2 runs" under it."""
    if value is None or value.value is None:
        return DASH
    shown = num(value.value, digits)
    if value.has_interval:
        # No title per cell: the column headers and the legend say what the line is, and a
        # page has two hundred of these.
        return format_html(
            '<span class="strong fig">{}</span><span class="ci">{}–{}</span>',
            shown,
            num(value.low, digits),
            num(value.high, digits),
        )
    return format_html(
        '<span class="strong fig">{}</span><span class="ci small-n">{}</span>',
        shown,
        value.runs_text,
    )


@register.simple_tag
def suite_cell(row: Row, name: str) -> str:
    """A row's per-suite figure (leaderboard.suite_columns), or a dash that says why."""
    found = row.suites.get(name)
    if found is None:
        return format_html('<span title="{}">{}</span>', MISSING_TITLE, DASH)
    return figure(found)


@register.filter
def figure_words(value: Figure | None, digits: int = 1) -> str:
    """A row's figure in a sentence: '56.0 (51.2–60.3, 7 runs)' or '56.0 (2 runs)'."""
    if value is None or value.value is None:
        return "—"
    if value.has_interval:
        interval = f"{num(value.low, digits)}–{num(value.high, digits)}"
        return f"{num(value.value, digits)} ({interval}, {value.runs_text})"
    return f"{num(value.value, digits)} ({value.runs_text})"


# Charts draw hundreds of marks: their two texts and link go through html.escape and their
# numbers are written as numbers, instead of format_html's conditional escape of every argument
# (a tenth of a cold board at 1,000,000 runs went to the scatter's 300 marks).


@register.simple_tag
def scatter_marks(chart: Scatter) -> str:
    # Each dot is a link (focusable) named by its <title>, which shows on hover; the short
    # label beside it shows on hover and focus (CSS), and always for the Pareto front's that
    # clash with no other (charts.Point.name_shown). No aria-label: the name must hold the
    # visible text, which the title and label make up.
    parts = []
    for p in chart.points:
        front = " front" if p.on_front else ""
        shown = f" {escape(p.name_shown)}" if p.name_shown else ""
        parts.append(
            f'<a href="{escape(p.href)}"><circle class="pt{front}" cx="{float(p.x)}" '
            f'cy="{float(p.y)}" r="{"5.5" if p.on_front else "3.5"}"><title>'
            f"{'Pareto front: ' if p.on_front else ''}{escape(p.label)}</title></circle>"
            f'<text class="pt-name{shown}" x="{float(p.name_x)}" y="{float(p.name_y)}" '
            f'text-anchor="{escape(p.name_anchor)}">{escape(p.name)}</text></a>'
        )
    return mark_safe("".join(parts))


@register.simple_tag
def strip_dots(row: StripRow) -> str:
    # A strip draws hundreds of dots: escape the two texts with html.escape and write numbers
    # as numbers, instead of format_html's conditional escape of every argument.
    parts = []
    for d in row.dots:
        circle = (
            f'<circle class="dot s{int(d.series)}" cx="{float(d.x)}" cy="{float(d.y)}" r="3.2">'
            f"<title>{escape(d.label)}</title></circle>"
        )
        parts.append(f'<a href="{escape(d.href)}">{circle}</a>' if d.href else circle)
    return mark_safe("".join(parts))
