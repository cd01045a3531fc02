"""Geometry for the server-rendered SVG charts (no Django).

Each builder returns plain data (coordinates, labels, links); the templates under
templates/leaderboard/charts/ draw it, so every label passes through Django's autoescaping.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NotRequired, Protocol, TypedDict

from leaderboard.stats import Box, box, pareto_front

WIDTH, HEIGHT = 720, 340
LEFT, RIGHT, TOP, BOTTOM = 56, 20, 16, 44
PALETTE_SIZE = 6  # series colours come from CSS classes s0..s5


@dataclass
class Tick:
    pos: float
    label: str


@dataclass
class Axis:
    # Templates read axis.log; without this they would call the axis and get nothing.
    do_not_call_in_templates = True

    low: float
    high: float
    start: float  # pixel of `low`
    end: float  # pixel of `high`
    log: bool = False

    def __call__(self, value: float) -> float:
        if self.log:
            low, high, value = math.log10(self.low), math.log10(self.high), math.log10(value)
        else:
            low, high = self.low, self.high
        if high == low:
            return (self.start + self.end) / 2
        return round(self.start + (value - low) / (high - low) * (self.end - self.start), 1)

    def ticks(self, count: int = 6) -> list[Tick]:
        values = _log_ticks(self.low, self.high) if self.log else _linear_ticks(self, count)
        return [Tick(self(v), _fmt(v)) for v in values if self.low <= v <= self.high]


def _fmt(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _nice_step(span: float, count: int) -> float:
    raw = span / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for multiple in (1, 2, 2.5, 5, 10):
        if raw <= multiple * magnitude:
            return multiple * magnitude
    return 10 * magnitude


def _linear_ticks(axis: Axis, count: int) -> list[float]:
    step = _nice_step(axis.high - axis.low, count)
    first = math.ceil(axis.low / step) * step
    return [round(first + i * step, 10) for i in range(int((axis.high - first) / step) + 1)]


def _log_ticks(low: float, high: float) -> list[float]:
    ticks = []
    for exponent in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        for multiple in (1, 2, 5):
            ticks.append(multiple * 10**exponent)
    inside = [t for t in ticks if low <= t <= high]
    # Thin a crowded axis to the powers of ten.
    return [t for t in inside if len(inside) <= 9 or math.log10(t).is_integer()]


def _linear_range(values: Sequence[float], *, floor_zero: bool = True) -> tuple[float, float]:
    low, high = min(values), max(values)
    if floor_zero:
        low = min(0.0, low)
    # One value (or a few nearly equal) still gets an axis a tenth of its size around it:
    # a lone run at 80 tok/s reads 76 to 84, not 80 to 81.
    least = max(abs(low), abs(high)) * 0.1 or 1.0
    if high - low < least:
        pad = (least - (high - low)) / 2
        low, high = low - pad, high + pad
        if min(values) >= 0:
            low = max(low, 0.0)
    step = _nice_step(high - low, 5)
    return math.floor(low / step) * step, math.ceil(high / step) * step


def _log_range(values: Sequence[float]) -> tuple[float, float]:
    """Bounds on half-decades (1, 3.16, 10, ...) around the values, never below 0.1."""
    low = max(0.1, 10 ** (math.floor(math.log10(min(values)) * 2) / 2))
    high = 10 ** (math.ceil(math.log10(max(values)) * 2) / 2)
    if high <= low:
        high = low * 10
    return low, high


# --- scatter: quality against decode speed ---------------------------------------------------


@dataclass
class Point:
    x: float
    y: float
    label: str
    href: str
    on_front: bool
    name: str = ""  # the short label drawn beside the dot (on hover or focus; always on the front)
    name_x: float = 0.0
    name_y: float = 0.0
    name_anchor: str = "start"
    # The front's names drawn without hover: those that clash with none drawn before them, at
    # the type size of wide screens and of phones (site.css).
    name_shown: str = ""  # "", "wide" or "wide narrow"


# The scatter's type in the drawing's units (site.css: 12 px; 22 on phones, where the drawing
# is scaled down), and a bold character's average width in type sizes.
NAME_FONTS = {"wide": 12.0, "narrow": 22.0}
NAME_CHAR_EM = 0.6


def _name_box(point: Point, font: float) -> tuple[float, float, float, float]:
    width = len(point.name) * font * NAME_CHAR_EM
    left = point.name_x - width if point.name_anchor == "end" else point.name_x
    return left, point.name_y - font, left + width, point.name_y + font * 0.25


def _show_front_names(front: list[Point]) -> None:
    """Mark the front's names that can be drawn without overlapping another: the two ends of
    the front first (the fastest, the best), then from the fastest down, each kept if its box
    clears every name kept before it. The rest show on hover and focus like any dot's."""
    order = sorted(front, key=lambda p: -p.x)
    if len(order) > 2:
        order = [order[0], order[-1], *order[1:-1]]
    for size, font in NAME_FONTS.items():
        kept: list[tuple[float, float, float, float]] = []
        for point in order:
            box = _name_box(point, font)
            if all(
                box[2] <= o[0] or box[0] >= o[2] or box[3] <= o[1] or box[1] >= o[3] for o in kept
            ):
                kept.append(box)
                point.name_shown = f"{point.name_shown} {size}".strip()


def _place_name(point: Point, name: str, plot_mid: float) -> Point:
    """The dot's short label: to its right on the left half, to its left on the right half,
    a little above it (below it at the top edge)."""
    point.name = name
    left = point.x > plot_mid
    point.name_anchor = "end" if left else "start"
    point.name_x = round(point.x - 8 if left else point.x + 8, 1)
    point.name_y = round(point.y + 16 if point.y < TOP + 14 else point.y - 8, 1)
    return point


@dataclass
class Scatter:
    width: int
    height: int
    x_axis: Axis
    y_axis: Axis
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    points: list[Point]
    front_path: str
    front: list[Point]
    plot: tuple[float, float, float, float]  # left, top, right, bottom


class ScatterItem(TypedDict):
    """One dot a page asks `scatter` for; an item without both values is not drawn."""

    x: float | None  # decode tok/s
    y: float | None  # quality, 0–100
    label: str
    href: str
    name: NotRequired[str]  # the short label beside the dot; else the label to its last ": "


def scatter(items: Sequence[ScatterItem]) -> Scatter | None:
    """Quality (y, 0–100) against decode tok/s (x, log scale); the Pareto front is marked.

    Each item needs x, y, label and href; its optional name is the short label drawn beside
    the dot (else the label up to its last ": ").
    """
    drawn = [(x, y, i) for i in items if (x := i["x"]) and x > 0 and (y := i["y"]) is not None]
    if not drawn:
        return None
    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    x_axis = Axis(*_log_range([x for x, _y, _i in drawn]), start=LEFT, end=right, log=True)
    y_axis = Axis(0, 100, start=bottom, end=TOP)
    front = pareto_front([(y, x) for x, y, _i in drawn])
    points = [
        _place_name(
            Point(x_axis(x), y_axis(y), i["label"], i["href"], index in front),
            i.get("name") or i["label"].rsplit(": ", 1)[0],
            (LEFT + right) / 2,
        )
        for index, (x, y, i) in enumerate(drawn)
    ]
    front_points = sorted((p for p in points if p.on_front), key=lambda p: p.x)
    _show_front_names(front_points)
    # A staircase: nothing above-right of it exists, which is what "Pareto front" means here.
    path: list[str] = []
    for index, p in enumerate(front_points):
        if index == 0:
            path.append(f"M{p.x},{p.y}")
        else:
            path.append(f"H{p.x}V{p.y}")
    return Scatter(
        width=WIDTH,
        height=HEIGHT,
        x_axis=x_axis,
        y_axis=y_axis,
        x_ticks=x_axis.ticks(),
        y_ticks=y_axis.ticks(),
        points=[p for p in points if not p.on_front] + front_points,
        front_path=" ".join(path),
        front=sorted(front_points, key=lambda p: -p.x),
        plot=(LEFT, TOP, right, bottom),
    )


# --- strip charts with a box per row ------------------------------------------------------------


@dataclass
class Dot:
    x: float
    y: float
    label: str
    href: str = ""
    series: int = 0


@dataclass
class StripRow:
    label: str
    y: float
    dots: list[Dot]
    box: Box | None
    # Pixel positions of the box (low, q1, median, q3, high, top, bottom, box_width), for n >= 3.
    box_px: dict[str, float] = field(default_factory=dict)
    series: int = 0


@dataclass
class Strip:
    width: int
    height: int
    axis: Axis
    ticks: list[Tick]
    rows: list[StripRow]
    unit: str
    plot: tuple[float, float, float, float]


ROW_HEIGHT = 34
STRIP_LEFT = 170


class StripItem(TypedDict):
    """One dot of a strip lane (leaderboard.summaries.dot)."""

    value: float | None
    label: str
    href: NotRequired[str]
    series: NotRequired[int]


# (label, dots) or (label, dots, every value): see `strip`.
StripLane = (
    tuple[str, Sequence[StripItem]] | tuple[str, Sequence[StripItem], Sequence[float | None] | None]
)


def strip(
    rows: Sequence[StripLane],
    *,
    unit: str,
    log: bool = False,
    fixed: tuple[float, float] | None = None,
) -> Strip | None:
    """One lane per row: every value as a dot (jittered) over the row's box and whiskers.

    rows holds (label, items) or (label, items, values); each item has value, label, optional
    href and series. With values, the box and the axis use them and the items are the dots
    drawn (a sample of a busy lane), so the summary still covers every run.
    """
    lanes_in = [(r[0], r[1], r[2] if len(r) > 2 else None) for r in rows]
    values = [
        v
        for _label, items, every in lanes_in
        for v in (every if every is not None else (i["value"] for i in items))
        if v is not None
    ]
    if not values:
        return None
    height = TOP + ROW_HEIGHT * len(lanes_in) + BOTTOM
    right, bottom = WIDTH - RIGHT, height - BOTTOM
    if fixed:
        low, high = fixed
    elif log and min(values) > 0 and max(values) / min(values) >= 4:
        low, high = _log_range(values)
    else:
        # A narrow spread reads better on a linear axis that does not start at zero.
        log = False
        low, high = _linear_range(values, floor_zero=min(values) < 0.3 * max(values))
    axis = Axis(low, high, start=STRIP_LEFT, end=right, log=log)
    lanes = []
    for index, (label, items, every) in enumerate(lanes_in):
        centre = TOP + ROW_HEIGHT * index + ROW_HEIGHT / 2
        present = [(value, i) for i in items if (value := i["value"]) is not None]
        dots = [
            Dot(
                axis(min(max(value, low), high)),
                # A deterministic jitter keeps equal values apart and the SVG cacheable.
                round(centre + ((n * 7919) % 13 - 6) * 1.1, 1),
                i["label"],
                i.get("href", ""),
                i.get("series", index) % PALETTE_SIZE,
            )
            for n, (value, i) in enumerate(present)
        ]
        summary = box(every if every is not None else (value for value, _i in present))
        box_px: dict[str, float] = {}
        if summary is not None and summary.n >= 3:
            box_px = {
                "low": axis(max(summary.low, low)),
                "q1": axis(max(summary.q1, low)),
                "median": axis(summary.median),
                "q3": axis(min(summary.q3, high)),
                "high": axis(min(summary.high, high)),
                "top": centre - 10,
                "bottom": centre + 10,
            }
            box_px["box_width"] = round(box_px["q3"] - box_px["q1"], 1)
        lanes.append(StripRow(label, centre, dots, summary, box_px, index % PALETTE_SIZE))
    return Strip(
        width=WIDTH,
        height=height,
        axis=axis,
        ticks=axis.ticks(),
        rows=lanes,
        unit=unit,
        plot=(STRIP_LEFT, TOP, right, bottom),
    )


# --- trend across engine versions ---------------------------------------------------------------


@dataclass
class TrendPoint:
    x: float
    y: float
    low_y: float
    high_y: float
    category: str
    value: float
    n: int
    low: float | None = None  # the whisker's ends, in the data's units
    high: float | None = None


@dataclass
class Trend:
    width: int
    height: int
    axis: Axis
    ticks: list[Tick]
    points: list[TrendPoint]
    path: str
    unit: str
    plot: tuple[float, float, float, float]


def trend(categories: Sequence[tuple[str, Sequence[float]]], *, unit: str) -> Trend | None:
    """Median per category (in the given order) with a min–max whisker; two or more needed."""
    boxes = [(name, box(values)) for name, values in categories]
    groups = [(name, summary) for name, summary in boxes if summary is not None]
    if len(groups) < 2:
        return None
    height = 260
    bottom, right = height - BOTTOM, WIDTH - RIGHT
    low, high = _linear_range([v for _, s in groups for v in (s.low, s.high)])
    axis = Axis(low, high, start=bottom, end=TOP)
    step = (right - LEFT) / len(groups)
    points = [
        TrendPoint(
            round(LEFT + step * (index + 0.5), 1),
            axis(summary.median),
            axis(summary.low),
            axis(summary.high),
            name,
            summary.median,
            summary.n,
        )
        for index, (name, summary) in enumerate(groups)
    ]
    path = " ".join(("M" if i == 0 else "L") + f"{p.x},{p.y}" for i, p in enumerate(points))
    return Trend(
        width=WIDTH,
        height=height,
        axis=axis,
        ticks=axis.ticks(5),
        points=points,
        path=path,
        unit=unit,
        plot=(LEFT, TOP, right, bottom),
    )


# --- several trends on one axis (one line per hardware class) ---------------------------------


@dataclass
class TrendLine:
    label: str
    series: int
    points: list[TrendPoint]
    path: str


@dataclass
class TrendLines:
    width: int
    height: int
    axis: Axis
    ticks: list[Tick]
    categories: list[Tick]  # x position and name of each category
    lines: list[TrendLine]
    unit: str
    plot: tuple[float, float, float, float]

    def describe(self) -> str:
        """The chart in words, for its <desc>: every line's medians and run counts."""
        parts = []
        for line in self.lines:
            points = "; ".join(
                f"{p.category} {p.value:,.1f} over {p.n} run{'s' if p.n != 1 else ''}"
                for p in line.points
            )
            parts.append(f"{line.label}: {points}.")
        return " ".join(parts)

    def describe_intervals(self) -> str:
        """The same with each median's 95% interval (interval_lines charts)."""
        parts = []
        for line in self.lines:
            points = "; ".join(
                f"{p.category} {p.value:,.1f} (95% CI {p.low:,.1f}–{p.high:,.1f}) over {p.n} "
                f"run{'s' if p.n != 1 else ''}"
                for p in line.points
            )
            parts.append(f"{line.label}: {points}.")
        return " ".join(parts)


def trend_lines(
    series: Sequence[tuple[str, Sequence[tuple[str, Sequence[float]]]]], *, unit: str
) -> TrendLines | None:
    """Median per category for each series, on one shared axis, with a min–max whisker.

    Every series lists the same categories in the same order; a category with no values in
    a series leaves a gap in its line. Drawn only when some series has two categories.
    """
    return _lines(
        [(label, [(name, box(values)) for name, values in cats]) for label, cats in series],
        unit=unit,
    )


class Spread(Protocol):
    """What a line chart draws of a category: its median, whisker ends and count (read only:
    a Box or a frozen runs.figures.Interval)."""

    @property
    def n(self) -> int: ...
    @property
    def median(self) -> float | None: ...
    @property
    def low(self) -> float | None: ...
    @property
    def high(self) -> float | None: ...


def interval_lines(
    series: Sequence[tuple[str, Sequence[tuple[str, Spread | None]]]], *, unit: str
) -> TrendLines | None:
    """Like trend_lines, from summaries already made (a median with its 95% interval, say):
    the whisker spans each summary's low to high. A summary without a median leaves a gap."""
    return _lines(
        [
            (
                label,
                [(name, s if s is not None and s.median is not None else None) for name, s in cats],
            )
            for label, cats in series
        ],
        unit=unit,
    )


def _lines(
    series: Sequence[tuple[str, Sequence[tuple[str, Spread | None]]]], *, unit: str
) -> TrendLines | None:
    """The shared geometry of trend_lines and interval_lines: each summary has n, median, low
    and high (None for a gap); drawn only when some series has two points."""
    names = [name for name, _value in series[0][1]] if series else []
    summaries = [(label, [s for _name, s in cats]) for label, cats in series]
    if not any(sum(s is not None for s in boxes) >= 2 for _label, boxes in summaries):
        return None
    present = [i for i in range(len(names)) if any(b[i] for _l, b in summaries)]
    height = 280
    bottom, right = height - BOTTOM, WIDTH - RIGHT
    values = [v for _l, b in summaries for s in b if s for v in (s.low, s.high, s.median)]
    axis = Axis(*_linear_range([v for v in values if v is not None]), start=bottom, end=TOP)
    step = (right - LEFT) / len(present)
    x_of = {i: round(LEFT + step * (place + 0.5), 1) for place, i in enumerate(present)}
    lines = []
    for index, (label, boxes) in enumerate(summaries):
        points: list[TrendPoint] = []
        path: list[str] = []
        gap = True
        for i in present:
            summary = boxes[i]
            if summary is None or summary.median is None:  # (the callers leave none such)
                gap = True
                continue
            low = summary.low if summary.low is not None else summary.median
            high = summary.high if summary.high is not None else summary.median
            point = TrendPoint(
                x_of[i],
                axis(summary.median),
                axis(low),
                axis(high),
                names[i],
                summary.median,
                summary.n,
                low,
                high,
            )
            points.append(point)
            path.append(("M" if gap else "L") + f"{point.x},{point.y}")
            gap = False
        if points:
            lines.append(TrendLine(label, index % PALETTE_SIZE, points, " ".join(path)))
    return TrendLines(
        width=WIDTH,
        height=height,
        axis=axis,
        ticks=axis.ticks(5),
        categories=[Tick(x_of[i], names[i]) for i in present],
        lines=lines,
        unit=unit,
        plot=(LEFT, TOP, right, bottom),
    )
