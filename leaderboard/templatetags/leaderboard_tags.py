"""Number formatting and query-string links for the leaderboard templates."""

from __future__ import annotations

from django import template
from django.utils.html import format_html_join

from leaderboard.filters import SORTS, BoardFilters

register = template.Library()
DASH = "—"


@register.filter
def num(value, digits: int = 1) -> str:
    """A number with fixed decimals and thousands separators, or a dash when missing."""
    if value is None or value == "":
        return DASH
    try:
        return f"{float(value):,.{int(digits)}f}"
    except (TypeError, ValueError):
        return DASH


@register.filter
def signed(value, digits: int = 1) -> str:
    """+1.2 / −1.2 (a true minus sign), or a dash when missing."""
    if value is None:
        return DASH
    text = f"{abs(float(value)):,.{int(digits)}f}"
    if round(float(value), int(digits)) == 0:
        return f"±{text}"
    return f"+{text}" if value > 0 else f"−{text}"


@register.filter
def absolute(value):
    return abs(value) if value is not None else None


@register.simple_tag
def board_qs(filters: BoardFilters, **changes) -> str:
    """The canonical query string of the view with some values changed ('' when empty)."""
    if changes and "page" not in changes:
        changes["page"] = 1
    query = filters.to_query(**changes)
    return f"?{query.urlencode()}" if query else ""


@register.simple_tag
def without_qs(filters: BoardFilters, name: str) -> str:
    query = filters.without(name)
    return f"?{query.urlencode()}" if query else ""


@register.inclusion_tag("leaderboard/_sort_th.html")
def sort_th(filters: BoardFilters, key: str, path: str, label: str = "", title: str = "") -> dict:
    """A sortable column header: a real link, swapped in place by htmx when it is loaded."""
    column_label = label or SORTS[key][1]
    active = filters.sort_key == key
    natural_desc = SORTS[key][2]
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


# Charts draw hundreds of marks; building them with format_html_join (which escapes every
# label and link) costs a fraction of a template loop per mark.


@register.simple_tag
def scatter_marks(chart) -> str:
    return format_html_join(
        "",
        '<a href="{}"><circle class="pt{}" cx="{}" cy="{}" r="{}"><title>{}{}</title></circle></a>',
        (
            (
                p.href,
                " front" if p.on_front else "",
                p.x,
                p.y,
                "5.5" if p.on_front else "3.5",
                "Pareto front: " if p.on_front else "",
                p.label,
            )
            for p in chart.points
        ),
    )


@register.simple_tag
def strip_dots(row) -> str:
    linked = format_html_join(
        "",
        '<a href="{}"><circle class="dot s{}" cx="{}" cy="{}" r="3.2">'
        "<title>{}</title></circle></a>",
        ((d.href, d.series, d.x, d.y, d.label) for d in row.dots if d.href),
    )
    plain = format_html_join(
        "",
        '<circle class="dot s{}" cx="{}" cy="{}" r="3.2"><title>{}</title></circle>',
        ((d.series, d.x, d.y, d.label) for d in row.dots if not d.href),
    )
    return linked + plain
