"""Compare two to four stacks on one hardware class, or class by class side by side.

Speed is compared only like for like: the same hardware class, score scale and benchmark
version, comparable runs. The class is the visitor's (?hw=) or the one the stacks share most
runs on; quality, which does not depend on the machine, is compared across all hardware.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_safe

from leaderboard import charts, places, stats, summaries
from leaderboard.summaries import ShownLane, StackEvidence
from leaderboard.views.pages import filtered_runs, stack_filters
from runs.figures import Interval
from runs.labels import labels_by_id
from runs.lane_rows import Lane, LaneKey
from runs.models import RunQuerySet, Stack

MAX_STACKS = 4
PICKER_LIMIT = 20
# (lane figure, label, decimals, higher is better); figures of the chosen class's lanes.
LANE_METRICS: list[tuple[Callable[[Lane], Interval], str, int, bool]] = [
    (lambda lane: lane.decode, "Decode tok/s", 1, True),
    (lambda lane: lane.prefill, "Prefill tok/s", 0, True),
    (lambda lane: lane.ttft, "TTFT ms", 0, False),
    (lambda lane: lane.overall, "Overall score", 1, True),
]


def parse_stack_ids(request: HttpRequest) -> list[int]:
    """Stack ids from ?stacks=1,2 (also repeated ?stacks=1&stacks=2), first four, no repeats."""
    ids: list[int] = []
    for value in request.GET.getlist("stacks"):
        for part in value.split(","):
            part = part.strip()
            if part.isdigit() and len(part) < 12 and int(part) not in ids:
                ids.append(int(part))
    return ids[:MAX_STACKS]


def compare_url(ids: list[int], extra: str = "") -> str:
    query = "stacks=" + ",".join(str(i) for i in ids) if ids else ""
    if extra:
        query = f"{query}&{extra}" if query else extra
    return reverse("leaderboard:compare") + (f"?{query}" if query else "")


@dataclass
class Cell:
    value: Interval | None
    delta: float | None = None
    percent: float | None = None
    better: bool | None = None  # compared with the first stack, taking direction into account


@dataclass
class Side:
    stack: Stack
    label: str
    proof: StackEvidence
    series: int
    lane: ShownLane | None = None  # this stack's lane on the chosen class
    quality: Interval | None = None  # on the chosen scale and version, all hardware
    remove_url: str = ""


@dataclass(frozen=True)
class Comparison:
    """What the compare page and its share image know about 2–4 stacks."""

    sides: list[Side]
    chosen: LaneKey | None  # the lane every stack has, speeds are compared on
    chosen_label: str  # its hardware class ("" without one)
    run_filter: str  # the run filters as a query string, without ?hw=
    shared: list[tuple[str, str, bool]]  # (class, slug, chosen) of every shared lane
    runs: RunQuerySet  # the stacks' published runs that the filters keep
    names: dict[int, tuple[str, str]]  # class id: (label, slug) of every class any stack has


@dataclass(frozen=True)
class ComparePage:
    """What compare.html shows: a picker alone below two stacks, the comparison from two."""

    ids: list[int]
    run_filter: str
    hw: str
    stacks: list[tuple[Stack, str]]  # (stack, label)
    picker_query: str = ""
    picker: list[tuple[str, str]] | None = None  # (label, add link); None with four stacks
    sides: list[Side] | None = None
    chosen: LaneKey | None = None
    chosen_label: str = ""
    lane_metrics: list[tuple[str, int, list[Cell]]] | None = None  # (label, digits, cells)
    quality_cells: list[Cell] | None = None
    side_by_side: list[tuple[str, str, list[ShownLane | None]]] | None = None
    class_links: list[tuple[str, str, bool]] | None = None  # (class, link, current)
    suite_rows: list[tuple[str, list[dict[str, Any] | None]]] | None = None
    verdicts: list[tuple[Side, stats.NoiseTest | None]] | None = None
    chart: charts.Strip | None = None
    share_qs: str = ""
    share: dict[str, str] | None = None

    def context(self) -> dict[str, Any]:
        # Shallow, unlike dataclasses.asdict: the template reads the sides' objects.
        return {field.name: getattr(self, field.name) for field in fields(self)}


def _cells(values: list[Interval | None], higher_is_better: bool) -> list[Cell]:
    """Medians, each with its change from the first; no change where either has no median."""
    base = values[0].median if values and values[0] else None
    cells: list[Cell] = []
    for index, value in enumerate(values):
        cell = Cell(value)
        if index and value and value.median is not None and base is not None:
            cell.delta = value.median - base
            cell.percent = 100.0 * cell.delta / base if base else None
            if cell.delta:
                cell.better = (cell.delta > 0) == higher_is_better
        cells.append(cell)
    return cells


def shared_lane(
    proofs: list[StackEvidence], hw_id: int | None
) -> tuple[LaneKey | None, list[LaneKey]]:
    """The lane every stack has (on the asked class, when one is asked): the one with the
    most runs on its thinnest side; and every shared lane, for the class picker."""
    keys = [{lane.figures.key: lane.run_count for lane in proof.lanes} for proof in proofs]
    shared = set(keys[0]).intersection(*keys[1:]) if keys else set()
    ranked = sorted(
        shared,
        key=lambda k: (-min(c[k] for c in keys), -sum(c[k] for c in keys), k),
    )
    chosen = [k for k in ranked if hw_id is None or k[0] == hw_id]
    return (chosen[0] if chosen else None), ranked


def noise_verdict(base: Side, other: Side) -> stats.NoiseTest | None:
    """Welch's t-test on decode tok/s, like for like (the chosen lane's runs on each side):
    per-run medians when both sides have two or more runs, otherwise the trial summaries of
    the two lanes' best runs."""
    if base.lane is None or other.lane is None:
        return None
    a = [r["decode"] for r in base.lane.rows if r["decode"] is not None]
    b = [r["decode"] for r in other.lane.rows if r["decode"] is not None]
    if len(a) >= 2 and len(b) >= 2:
        return stats.welch_samples(a, b, basis="runs")
    best_a, best_b = base.lane.best, other.lane.best
    fields = ("decode_tps_mean", "decode_tps_stdev", "speed_sample_count")
    if not best_a or not best_b or any(best_a[f] is None or best_b[f] is None for f in fields):
        return None
    return stats.welch(
        best_a["decode_tps_mean"],
        best_a["decode_tps_stdev"],
        best_a["speed_sample_count"],
        best_b["decode_tps_mean"],
        best_b["decode_tps_stdev"],
        best_b["speed_sample_count"],
        basis="samples",
    )


def comparison(
    request: HttpRequest, ordered: list[Stack], labels: dict[int, str] | None = None
) -> Comparison:
    """Everything the page and its share image show about 2–4 stacks."""
    filters, hw = stack_filters(request)
    # ?hw= picks the class to compare on; every class still shows side by side.
    if hasattr(filters, "hw"):
        filters = replace(filters, hw="")
    runs = filtered_runs(summaries.published_runs_of([s.id for s in ordered]), filters, "")
    rows = summaries.run_rows(runs)
    attempts = summaries.attempts_of([s.id for s in ordered])
    labels = labels or labels_by_id(ordered)
    sides = [
        Side(
            stack,
            labels[stack.id],
            summaries.evidence([r for r in rows if r["stack_id"] == stack.id], attempts),
            index,
        )
        for index, stack in enumerate(ordered)
    ]
    names = {
        lane.figures.hardware_class_id: (lane.hardware, lane.slug)
        for side in sides
        for lane in side.proof.lanes
    }
    hw_id = next((i for i, (_label, slug) in names.items() if slug == hw), None) if hw else None
    chosen, shared = shared_lane([s.proof for s in sides], hw_id)
    if hw and hw_id is None:
        chosen = None  # a class none of these stacks ran on: nothing to compare on
    every_run = not filters.run_filter_query()
    for side in sides:
        if chosen is None:
            continue  # no lane and no quality on a chosen scale
        side.lane = side.proof.lane(chosen)
        scope = side.proof.scope(chosen[1:])
        side.quality = scope.quality if scope else None
        if side.lane and every_run:
            # The board ranks every run's lane: its place is the page's only when no filter
            # drops runs.
            class_id = side.lane.figures.hardware_class_id
            found = places.lane_places(side.stack, [class_id], *chosen[1:])
            side.lane.place = found.get(class_id)
    return Comparison(
        sides=sides,
        chosen=chosen,
        chosen_label=names[chosen[0]][0] if chosen else "",
        run_filter=filters.run_filter_query().urlencode(),
        shared=[(names[k[0]][0], names[k[0]][1], k == chosen) for k in shared],
        runs=runs,
        names=names,
    )


def _side_by_side(
    sides: list[Side], names: dict[int, tuple[str, str]]
) -> list[tuple[str, str, list[ShownLane | None]]]:
    """(class, slug, [each stack's lane there or None]) for every class any stack ran on, on
    each stack's first scope: classes are shown apart, never compared with each other."""
    rows = []
    for class_id, (label, slug) in names.items():
        cells: list[ShownLane | None] = []
        for side in sides:
            scope = side.proof.scopes[0] if side.proof.scopes else None
            lanes = scope.lanes if scope else []
            cells.append(next((x for x in lanes if x.figures.hardware_class_id == class_id), None))
        rows.append((label, slug, cells))
    # The classes with most runs first, then by name.
    return sorted(rows, key=lambda r: (-sum(c.run_count for c in r[2] if c), r[0]))


@require_safe
def compare(request: HttpRequest) -> HttpResponse:
    """Stacks side by side; with fewer than two, a picker to add more."""
    ids = parse_stack_ids(request)
    filters, hw = stack_filters(request)
    run_filter = filters.run_filter_query()
    if hw:
        run_filter["hw"] = hw
    extra = run_filter.urlencode()
    canonical = compare_url(ids, extra)
    # Ticked rows arrive as ?stacks=1&stacks=2 (plus empty fields); share one clean link.
    if len(request.GET.getlist("stacks")) > 1 or any(v == "" for _, v in request.GET.items()):
        return redirect(canonical)
    stacks = {s.id: s for s in Stack.objects.filter(id__in=ids, best_run__isnull=False)}
    ordered = [stacks[i] for i in ids if i in stacks]
    shown = [s.id for s in ordered]
    query = request.GET.get("find", "").strip()[:100]
    offered = _picker(query, exclude=shown) if len(ordered) < MAX_STACKS else []
    # One set of labels for every stack on the page, the offered ones included.
    labels = labels_by_id([*ordered, *offered])
    picker = None
    if len(ordered) < MAX_STACKS:
        picker = [(labels[s.id], compare_url([*shown, s.id], extra)) for s in offered]
    named = [(s, labels[s.id]) for s in ordered]
    if len(ordered) < 2:
        page = ComparePage(shown, extra, hw, named, query, picker)
        return render(request, "leaderboard/compare.html", page.context())

    found = comparison(request, ordered, labels)
    sides = found.sides
    for side in sides:
        side.remove_url = compare_url([i for i in shown if i != side.stack.id], extra)
    chosen = found.chosen
    suites: dict[int, dict[str, dict[str, Any]]] = {}
    if chosen:
        scale, version = chosen[1:]
        suites = summaries.suite_table(found.runs.of_version(scale, version))
    suite_names = sorted({name for table in suites.values() for name in table})
    hw_query = compare_url(shown, filters.run_filter_query().urlencode())
    page = ComparePage(
        shown,
        # Without ?hw= (the class picker's links add it), unlike the picker's links.
        found.run_filter,
        hw,
        named,
        query,
        picker,
        sides=sides,
        chosen=chosen,
        chosen_label=found.chosen_label,
        lane_metrics=[
            (label, digits, _cells([figure(s.lane.figures) if s.lane else None for s in sides], up))
            for figure, label, digits, up in LANE_METRICS
        ]
        if chosen
        else [],
        quality_cells=_cells([s.quality for s in sides], True) if chosen else [],
        side_by_side=_side_by_side(sides, found.names),
        class_links=[
            (label, f"{hw_query}&hw={slug}", current) for label, slug, current in found.shared
        ],
        suite_rows=[
            (name, [suites.get(s.stack.id, {}).get(name) for s in sides]) for name in suite_names
        ],
        verdicts=[(side, noise_verdict(sides[0], side)) for side in sides[1:]] if chosen else [],
        chart=charts.strip(
            [
                summaries.strip_lane(
                    side.label, side.lane.rows, "decode", side.series, summaries.run_href()
                )
                for side in sides
                if side.lane
            ],
            unit=f"decode tok/s on {found.chosen_label}",
            log=True,
        )
        if chosen
        else None,
        share_qs=compare_url(shown, extra).split("?", 1)[1],
        share=_share(request, sides, found.chosen_label, extra),
    )
    return render(request, "leaderboard/compare.html", page.context())


def _picker(query: str, *, exclude: list[int]) -> list[Stack]:
    stacks = Stack.objects.filter(best_run__isnull=False).exclude(id__in=exclude)
    if query:
        stacks = stacks.filter(model_id__icontains=query)
    return list(
        stacks.select_related("best_run").order_by(
            F("best_run__overall_score").desc(nulls_last=True), "id"
        )[:PICKER_LIMIT]
    )


def _share(request: HttpRequest, sides: list[Side], on: str, extra: str) -> dict[str, str]:
    base = f"{request.scheme}://{request.get_host()}"
    query = "stacks=" + ",".join(str(side.stack.id) for side in sides)
    if extra:
        query += f"&{extra}"
    parts = []
    for side in sides:
        text = side.label
        if side.quality and side.quality.median is not None:
            text += f": quality {side.quality.median:.1f} (all hardware)"
        if side.lane and side.lane.figures.decode.median is not None:
            text += f", {side.lane.figures.decode.median:.1f} tok/s on {on}"
        parts.append(text)
    return {
        "title": " vs ".join(side.label for side in sides),
        "description": "; ".join(parts) + ".",
        "url": f"{base}{reverse('leaderboard:compare')}?{query}",
        "image": f"{base}{reverse('leaderboard:compare_image')}?{query}",
    }
