"""Read queries behind the public board: the hardware a view is about, its lanes, feeds.

Ranked rows are lanes: one stack on one hardware class, on one score scale and benchmark
version. Speed, and every score that includes speed, is read only from a lane on one class;
the all-hardware view reads the pooled lanes, which carry quality alone.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Count, F, Q, QuerySet, Sum, Window
from django.db.models.expressions import OrderBy
from django.db.models.functions import Coalesce, RowNumber

from leaderboard import cache as board_cache
from leaderboard import filters as board_filters
from leaderboard import rows as board_rows
from leaderboard import suite_columns
from leaderboard.filters import PAGE_SIZE, BoardFilters, sort_spec
from leaderboard.models import ClassBoard
from leaderboard.rows import Figure, Row
from leaderboard.scopes import Scope, default_scale, hardware_scope, prefer_v3
from leaderboard.suite_columns import SuiteFigures
from runs import methods
from runs.methods import DEFAULT_METHOD
from runs.models import (
    HardwareClass,
    Lane,
    Run,
    RunQuerySet,
    ScoreScale,
    Stack,
)

EXPORT_LIMIT = 5000
# A view computed from runs reads every matching run into leaderboard.rows.aggregate (about
# 20,000 runs a second on the benchmark machine); beyond this it asks for a narrower view.
RUN_FILTER_LIMIT = 20_000
# Columns of the narrow lane list: enough to sort, count, paginate and draw the scatter.
NARROW = (
    "id",
    "value_quality",
    "value_decode",
    "stack_id",
    "stack__model_id",
    "stack__quantization",
    "stack__engine",
)
# One class of hardware_choices: id, slug, label, kind, vendor, chip, count, memory_gb and
# runs. A plain dict: the views and the API read it as one, key by key.
HardwareChoice = dict[str, Any]
# One dot of the board's scatter (_point): stack_id, quality_score, decode_tps_median and the
# stack's model, quantization and engine under their values() names (views.board.scatter_for).
ScatterPoint = dict[str, Any]
# A run as run_values reads it, in board_rows.RUN_COLUMNS order (no submitter).
RunValues = tuple[
    int,
    int,
    int | None,
    float | None,
    float | None,
    float | None,
    float | None,
    float | None,
    datetime,
]


def version_key(version: str) -> tuple[tuple[int, int, str], ...]:
    """Benchmark versions newest first: numeric parts compared as numbers, others last."""
    parts = []
    for piece in version.replace("-", ".").split("."):
        parts.append((1, int(piece), "") if piece.isdigit() else (0, 0, piece))
    return tuple(parts)


def view_versions(filters: BoardFilters, scope: Scope) -> dict[str, int]:
    """Rows each benchmark version has in this view (its hardware, scale, method and stack
    filters), newest first; cached until the next publish."""
    every_run = filters.scale == ScoreScale.V3 and not filters.comparable_only
    method = filters.method or filters.ranked_method
    view = replace(filters, bv="", page=1, sort="", dir="")
    key = f"{view.scale}|{view.to_query().urlencode()}|{scope.pooled}|{scope.class_ids}|{method}"

    def compute() -> dict[str, int]:
        boards = _boards_in_view(view, scope)
        if boards is not None:
            counts: dict[str, int] = defaultdict(int)
            for version, ranked in boards:
                counts[version] += ranked.get(method, 0) if method else sum(ranked.values())
            counts = {version: n for version, n in counts.items() if n}
        else:
            lanes = _scope_lanes(view, scope)
            if method:
                lanes = lanes.filter(stack__method=method)
            counts = dict(lanes.values_list("benchmark_version").annotate(n=Count("id")))
        if every_run and not scope.pooled:
            runs = (
                Run.objects.published()
                .on_scale(filters.scale)
                .filter(comparable=False, hardware_class_id__in=scope.class_ids or [])
                .filter(replace(view, method="", ranked_method="").stack_q())
            )
            if method:
                runs = runs.filter(method=method)
            for version in runs.values_list("benchmark_version", flat=True).distinct():
                counts.setdefault(version, 0)
        return {v: counts[v] for v in sorted(counts, key=version_key, reverse=True)}

    return board_cache.cached("view-versions", key, compute)


def benchmark_version(filters: BoardFilters) -> tuple[str, list[str]]:
    """The version a view ranks and all it offers, newest first: the one asked for, else the
    one with the most rows in this view (the newest of those tied), so that a new version's
    first runs on one class never empty another class's board; the others are one click away."""
    counts = view_versions(filters, hardware_scope(filters))
    versions = list(counts)
    if filters.version_named is not None and filters.version_named in versions:
        return filters.version_named, versions
    if not versions:
        return "", versions
    return max(versions, key=lambda v: (counts[v], version_key(v))), versions


def _text_q(text: str, *, stack: str = "stack_id", hardware: str = "hardware_class_id") -> Q:
    # Two small lookups instead of ILIKE across a join for every lane or run.
    stacks = Stack.objects.filter(
        Q(model_id__icontains=text) | Q(engine__icontains=text) | Q(quantization__iexact=text)
    ).values_list("id", flat=True)
    classes = HardwareClass.objects.filter(
        Q(label__icontains=text) | Q(chip__icontains=text)
    ).values_list("id", flat=True)
    return Q(**{f"{stack}__in": list(stacks)}) | Q(**{f"{hardware}__in": list(classes)})


# --- which scale and measurement method a view ranks ---------------------------------------

# Where the visitor named no scale: the first of these with rows on their hardware (a class
# measured only for speed, as most imported data is, shows its speed-only board).
SCALE_ORDER = (ScoreScale.V3, ScoreScale.SPEED_ONLY, ScoreScale.V2)


def _scope_lanes(filters: BoardFilters, scope: Scope) -> QuerySet[Lane]:
    """Published lanes on the view's scale and hardware, any method and version."""
    qs = Lane.objects.filter(score_scale=filters.scale, run_count__gt=0, best_run__isnull=False)
    qs = qs.filter(replace(filters, method="", ranked_method="").stack_q())
    if scope.pooled:
        return qs.filter(hardware_class__isnull=True)
    return qs.filter(hardware_class_id__in=scope.class_ids or [])


def _boards_in_view(filters: BoardFilters, scope: Scope) -> list[tuple[str, dict[str, int]]] | None:
    """(version, {method: lanes}) of each class board on the view's scale and hardware: the
    counts _scope_lanes would give, read from the class boards (leaderboard.models) where the
    view narrows no stack (a board holds each of its lanes); None where it does."""
    if scope.pooled or replace(filters, method="", ranked_method="").stack_q():
        return None
    boards = ClassBoard.objects.filter(
        hardware_class_id__in=scope.class_ids or [], score_scale=filters.scale
    )
    return [
        (version, ranked or {})
        for version, ranked in boards.values_list("benchmark_version", "ranked")
    ]


def method_counts(filters: BoardFilters, scope: Scope) -> dict[str, int]:
    """Lanes in view per measurement method (runs.methods), most first; cached until the next
    publish, as the pages are."""
    view = replace(filters, method="", ranked_method="", page=1, sort="", dir="")
    key = f"{view.scale}|{view.to_query().urlencode()}|{scope.pooled}|{scope.class_ids}"

    def compute() -> dict[str, int]:
        boards = _boards_in_view(view, scope)
        if boards is not None:
            counted: Counter[str] = Counter()
            for _version, ranked in boards:
                counted.update(ranked)
            pairs = [(method, n) for method, n in counted.items() if n]
        else:
            lanes = _scope_lanes(view, scope)
            pairs = list(lanes.values_list("stack__method").annotate(n=Count("id")))
        return dict(sorted(pairs, key=lambda item: (-item[1], item[0])))

    return board_cache.cached("methods", key, compute)


def _busier_scale(filters: BoardFilters, scope: Scope) -> str:
    """Ranked v3 where it has a few rows on this hardware or as many as speed only, else speed
    only, else legacy v2 where only it has rows: the scale a view opens on where none was
    named."""
    if scope.empty:
        return ScoreScale.V3
    rows = {
        scale: sum(method_counts(replace(filters, scale=scale), scope).values())
        for scale in SCALE_ORDER
    }
    if not rows[ScoreScale.V3] and not rows[ScoreScale.SPEED_ONLY] and rows[ScoreScale.V2]:
        return ScoreScale.V2
    return prefer_v3(rows[ScoreScale.V3], rows[ScoreScale.SPEED_ONLY])


def settle(filters: BoardFilters) -> BoardFilters:
    """The filters with what the visitor left open decided: the scale (where none was named,
    the busier of v3 and speed only on their hardware; with no hardware named either,
    default_scale's) and the measurement method ranked
    (the one named, else the one with the most lanes in view). Speeds of two methods are never
    ranked together (runs.methods), so a view ranks one and names the others."""
    if filters.scale_named and filters.ranked_method:
        return filters
    # Only the default class depends on the scale (and is cached): one scope serves the rest.
    scope = None if not (filters.picks_hardware or filters.pooled) else hardware_scope(filters)
    if not filters.scale_named and filters.scale == ScoreScale.V3:
        if scope is None:
            filters = replace(filters, scale=default_scale())
        elif not filters.pooled:
            filters = replace(filters, scale=_busier_scale(filters, scope))
    filters = replace(filters, scale_named=True)
    if filters.method:
        return replace(filters, ranked_method=filters.method)
    counts = method_counts(filters, scope or hardware_scope(filters))
    return replace(filters, ranked_method=next(iter(counts), DEFAULT_METHOD))


# --- the board ------------------------------------------------------------------------------


@dataclass
class Board:
    # Of the view's rows (run-filtered views) or of its lanes' NARROW tuples.
    page: Page[Row] | Page[tuple[Any, ...]]
    rows: list[Row]
    points: list[ScatterPoint]
    scope: Scope
    version: str
    filters: BoardFilters  # as settled: the scale and method ranked
    versions: list[str] = field(default_factory=list)
    too_many_runs: int = 0  # a run filter matched more than RUN_FILTER_LIMIT runs
    methods: dict[str, int] = field(default_factory=dict)  # lanes in view per method

    @property
    def method(self) -> str:
        return self.filters.ranked_method

    @property
    def method_label(self) -> str:
        return methods.method_label(self.method)

    @property
    def method_imported(self) -> bool:
        return methods.is_imported(self.method)

    @property
    def other_methods(self) -> list[tuple[str, str, int]]:
        """(key, label, lanes) of the methods this view does not rank, one click away."""
        return [
            (key, methods.method_label(key), n)
            for key, n in self.methods.items()
            if key != self.method
        ]

    @property
    def total(self) -> int:
        return self.page.paginator.count

    @property
    def other_versions(self) -> list[str]:
        return [v for v in self.versions if v != self.version]


def lanes(filters: BoardFilters, scope: Scope, version: str) -> QuerySet[Lane]:
    """Stored lanes in the view, annotated with the values they show, in display order."""
    qs = lanes_in_view(filters, scope, version)
    order = lane_order(filters)
    if scope.grouped:
        # Each class's lanes ranked among themselves, the classes one after another.
        rank = Window(RowNumber(), partition_by=[F("hardware_class_id")], order_by=order)
        qs = qs.annotate(class_rank=rank)
        return qs.order_by("hardware_class__label", "hardware_class_id", *order)
    return qs.order_by(*order)


def lanes_in_view(filters: BoardFilters, scope: Scope, version: str) -> QuerySet[Lane]:
    """Stored lanes in the view, annotated with the values they show (lanes, unordered)."""
    qs = Lane.objects.filter(
        score_scale=filters.scale,
        benchmark_version=version,
        best_run__isnull=False,
        run_count__gt=0,
    ).filter(filters.stack_q())
    if scope.pooled:
        qs = qs.filter(hardware_class__isnull=True)
    else:
        qs = qs.filter(hardware_class_id__in=scope.class_ids or [])
    if filters.q:
        qs = qs.filter(_text_q(filters.q))
    return qs.annotate(
        **{f"value_{name}": board_rows.LANE_VALUES[name] for name in board_rows.FIGURES}
    )


def lane_order(filters: BoardFilters) -> list[OrderBy]:
    """A board's lane order within a class, as ORDER BY terms, nulls last: what lanes() sorts
    by, and the class boards' stored order (leaderboard.places)."""
    # A suite's figure is no lane column: those views order here by the default and then by
    # the suite (_suite_sorted).
    key = filters.sort_key if filters.sort_key in board_rows.LANE_SORTS else filters.default_sort
    descending = filters.descending if key == filters.sort_key else sort_spec(key)[1]
    order: list[tuple[Any, bool]] = [
        (F(board_rows.LANE_SORTS[key]), descending),
        (F(board_rows.LANE_SORTS[filters.default_sort]), True),
        (F("stack_id"), False),
        (F("hardware_class_id"), False),
    ]
    if board_filters.ranks_by_figure(key):
        # Lanes of one or two runs rank after those with an interval (rows.sort_rows).
        order.insert(0, (board_rows.LANE_TIER, False))
    return [
        expression.desc(nulls_last=True) if descending else expression.asc(nulls_last=True)
        for expression, descending in order
    ]


def _lane_rows(ids: list[int], scale: str, ranks: list[int] | None = None) -> list[Row]:
    by_id = Lane.objects.select_related("stack", "hardware_class", "best_run").in_bulk(ids)
    rows = []
    for place, lane_id in enumerate(ids):
        if lane_id in by_id:
            rows.append(board_rows.from_lane(by_id[lane_id], scale=scale))
            rows[-1].rank = ranks[place] if ranks else None
    return rows


def _matching(filters: BoardFilters, scope: Scope, version: str) -> RunQuerySet:
    """The published runs a run-filtered view is computed from."""
    runs = Run.objects.published().of_version(filters.scale, version).filter(filters.stack_q())
    if filters.comparable_only:
        runs = runs.comparable()
    if not scope.pooled:
        runs = runs.filter(hardware_class_id__in=scope.class_ids or [])
    if filters.q:
        runs = runs.filter(_text_q(filters.q))
    return filters.apply_to_runs(runs)


def run_values(filters: BoardFilters, scope: Scope, version: str) -> list[RunValues]:
    """The matching published runs as board_rows.RUN_COLUMNS tuples, without the submitter
    (a join to every run's submission; `_count_submitters` counts them for the rows needed)."""
    return list(
        _matching(filters, scope, version).values_list(
            "id",
            "stack_id",
            "hardware_class_id",
            "overall_score",
            "quality_score",
            Coalesce("decode_tps_median", "decode_tps_mean"),
            Coalesce("prefill_tps_median", "prefill_tps_mean"),
            Coalesce("ttft_ms_median", "ttft_ms_mean"),
            "started_at",
        )
    )


def _count_submitters(
    rows: list[Row], filters: BoardFilters, scope: Scope, version: str
) -> list[Row]:
    """Distinct submitters of each row's matching runs (imported names and accounts apart,
    as runs.services counts a stack's)."""
    runs = _matching(filters, scope, version).filter(stack_id__in={r.stack_id for r in rows})
    group = ["stack_id"] if scope.pooled else ["stack_id", "hardware_class_id"]
    counted = runs.values(*group).annotate(
        n=Count("submission__submitter_name", distinct=True, filter=Q(submission__submitter=None))
        + Count("submission__submitter", distinct=True)
    )
    found = {(c["stack_id"], c.get("hardware_class_id")): c["n"] for c in counted}
    for row in rows:
        row.submitters = found.get((row.stack_id, row.hardware_class_id), 0)
    return rows


def _too_many(filters: BoardFilters, scope: Scope, version: str) -> int:
    """How many runs a run-filtered view matches, when that is more than it may read."""
    count = _matching(filters, scope, version)[: RUN_FILTER_LIMIT + 1].count()
    return count if count > RUN_FILTER_LIMIT else 0


def _rows_from_runs(filters: BoardFilters, scope: Scope, version: str) -> list[Row]:
    """Every row of a view whose filters pick among a lane's runs, sorted, stacks attached."""
    found = board_rows.aggregate(
        run_values(filters, scope, version), scale=filters.scale, pooled=scope.pooled
    )
    stacks = Stack.objects.in_bulk({r.stack_id for r in found})
    classes = HardwareClass.objects.in_bulk({r.hardware_class_id for r in found} - {None})
    found = board_rows.attach(found, stacks=stacks, classes=classes, runs={})
    if filters.suites:
        # Every row's, for the sort; the same matching runs as the row's other figures.
        runs = _matching(filters, scope, version).filter(stack_id__in={r.stack_id for r in found})
        by_row = suite_columns.figures(runs, filters.suites, pooled=scope.pooled)
        suite_columns.attach(found, by_row, filters.suites)
    if filters.sort_key == "submitters":
        found = _count_submitters(found, filters, scope, version)
    found = board_rows.sort_rows(
        found, filters.sort_key, descending=filters.descending, tie=filters.default_sort
    )
    return board_rows.by_class(found) if scope.grouped else found


def _finish_run_rows(
    rows: list[Row], filters: BoardFilters, scope: Scope, version: str
) -> list[Row]:
    """Best runs, submitters and attempt counts (every upload on the lane) for the rows shown."""
    runs = Run.objects.in_bulk([r.best_run_id for r in rows])
    stored = Lane.objects.filter(
        score_scale=filters.scale,
        benchmark_version=version,
        stack_id__in={r.stack_id for r in rows},
    ).values_list("stack_id", "hardware_class_id", "attempt_count")
    attempts: dict[tuple[int, int | None], int] = {(s, c): n for s, c, n in stored}
    for row in rows:
        row.best_run = runs.get(row.best_run_id)
        row.attempts = max(row.runs, attempts.get((row.stack_id, row.hardware_class_id), 0))
    if rows and filters.sort_key != "submitters":
        _count_submitters(rows, filters, scope, version)
    return rows


def board(filters: BoardFilters, *, scatter_limit: int = 300) -> Board:
    """The page of rows the filters ask for, plus the scatter's points.

    The scatter (quality against decode speed) is drawn only for a single hardware class:
    points from different machines would make a Pareto front across hardware."""
    filters = settle(filters)
    scope = hardware_scope(filters)
    version, versions = benchmark_version(filters)
    no_rows = scope.empty or (scope.pooled and filters.scale == ScoreScale.SPEED_ONLY)
    chart = scope.single is not None and filters.scale != ScoreScale.SPEED_ONLY
    counts = {} if no_rows else method_counts(filters, scope)
    if no_rows:
        empty: Page[Row] = Paginator([], PAGE_SIZE).get_page(1)
        return Board(empty, [], [], scope, version, filters, versions, methods=counts)
    if filters.run_level and (n := _too_many(filters, scope, version)):
        empty = Paginator([], PAGE_SIZE).get_page(1)
        return Board(
            empty, [], [], scope, version, filters, versions, too_many_runs=n, methods=counts
        )
    page: Page[Row] | Page[tuple[Any, ...]]
    candidates: Sequence[ScatterPoint | None]
    if filters.run_level:
        every = _rows_from_runs(filters, scope, version)
        page = Paginator(every, PAGE_SIZE).get_page(filters.page)
        rows = _finish_run_rows(list(page.object_list), filters, scope, version)
        # (_rows_from_runs attaches every row's stack: a row whose stack is gone is dropped.)
        candidates = (
            [_point(r.stack, r.quality, r.decode) for r in every if r.stack is not None]
            if chart
            else []
        )
    else:
        narrow, by_row = _view_lanes(filters, scope, version, NARROW)
        page = Paginator(narrow, PAGE_SIZE).get_page(filters.page)
        shown = list(page.object_list)
        ranks = [row[-1] for row in shown] if scope.grouped else None
        rows = _lane_rows([row[0] for row in shown], filters.scale, ranks)
        _lane_suites(rows, filters, scope, version, by_row)
        candidates = (
            _lane_points([r[: len(NARROW)] for r in narrow[:scatter_limit]]) if chart else []
        )
    points = [p for p in candidates if p][:scatter_limit]
    if filters.ranks_by_figure and not filters.sort_suite:
        # (A suite's own n sets its tiers; the rows' run counts would mark the wrong place.)
        board_rows.mark_tiers(rows)
    return Board(page, rows, points, scope, version, filters, versions, methods=counts)


def _point(stack: Stack, quality: Figure | None, decode: Figure | None) -> ScatterPoint | None:
    if quality is None or decode is None or not decode.value:
        return None
    return {
        "stack_id": stack.id,
        "quality_score": quality.value,
        "decode_tps_median": decode.value,
        "stack__model_id": stack.model_id,
        "stack__quantization": stack.quantization,
        "stack__engine": stack.engine,
    }


def _lane_points(narrow: list[tuple[Any, ...]]) -> list[ScatterPoint]:
    keys: tuple[str, ...] = ("quality_score", "decode_tps_median", "stack_id")
    keys += ("stack__model_id", "stack__quantization", "stack__engine")
    return [
        dict(zip(keys, row[1:], strict=True)) for row in narrow if row[1] is not None and row[2]
    ]


def board_export_rows(filters: BoardFilters) -> tuple[list[Row], Scope, str]:
    """Every row of the filtered view in display order (capped), for CSV/JSON/Markdown."""
    filters = settle(filters)
    scope = hardware_scope(filters)
    version, _versions = benchmark_version(filters)
    if scope.empty or (scope.pooled and filters.scale == ScoreScale.SPEED_ONLY):
        return [], scope, version
    if filters.run_level and _too_many(filters, scope, version):
        return [], scope, version
    if filters.run_level:
        rows = _rows_from_runs(filters, scope, version)[:EXPORT_LIMIT]
        return _finish_run_rows(rows, filters, scope, version), scope, version
    found, by_row = _view_lanes(filters, scope, version, ("id", "stack_id"), limit=EXPORT_LIMIT)
    ranks = [row[-1] for row in found] if scope.grouped else None
    rows = _lane_rows([row[0] for row in found], filters.scale, ranks)
    return _lane_suites(rows, filters, scope, version, by_row), scope, version


def _view_lanes(
    filters: BoardFilters, scope: Scope, version: str, columns: tuple[str, ...], limit: int = 0
) -> tuple[list[tuple[Any, ...]], SuiteFigures]:
    """The view's lanes as `columns` (which hold "id" and "stack_id"), then the class rank
    where grouped, in display order; with the suite figures found for a suite sort."""
    qs = lanes(filters, scope, version)
    if filters.sort_suite:
        return suite_columns.sorted_lanes(qs, columns, filters, scope, version, limit=limit)
    extra = ("class_rank",) if scope.grouped else ()
    return list(qs.values_list(*columns, *extra)[: limit or None]), {}


def _lane_suites(
    rows: list[Row], filters: BoardFilters, scope: Scope, version: str, by_row: SuiteFigures
) -> list[Row]:
    """The rows' per-suite columns: from `by_row` where the sort found them, else from the
    rows' lanes' runs (one query; none without suite columns)."""
    if filters.suites and rows:
        keys = [(r.stack_id, r.hardware_class_id) for r in rows]
        by_row = by_row or suite_columns.lane_figures(keys, filters, scope, version)
        suite_columns.attach(rows, by_row, filters.suites)
    return rows


# --- feeds and other lists ------------------------------------------------------------------


def restrict_runs(runs: RunQuerySet, filters: BoardFilters) -> RunQuerySet:
    """Apply the filters that say where and how a run was measured (hardware, profile, date).

    Hardware is restricted only where the visitor named some: no default class here."""
    scope = hardware_scope(filters, pick_default=False)
    if scope.class_ids is not None:
        runs = runs.filter(hardware_class_id__in=scope.class_ids)
    return filters.apply_to_runs(runs)


def matching_runs(filters: BoardFilters) -> RunQuerySet:
    """Published runs on the view's scale that pass every filter (any hardware if none named)."""
    runs = Run.objects.published().on_scale(filters.scale).filter(filters.stack_q())
    if filters.comparable_only:
        runs = runs.comparable()
    if filters.version_named is not None:
        runs = runs.of_version(filters.scale, filters.version_named)
    if filters.q:
        runs = runs.filter(_text_q(filters.q))
    return restrict_runs(runs, filters)


def newest_approved(filters: BoardFilters, limit: int = 50) -> RunQuerySet:
    """Recently approved runs matching the filters, newest decision first (the Atom feed)."""
    # Run.approved_at is the submission's decision (else the storing): the order of an index
    # (run_published_feed_idx, run_published_class_feed_idx), read until `limit` runs match.
    return (
        matching_runs(filters)
        .select_related("stack", "hardware", "hardware_class", "submission__submitter")
        .order_by(F("approved_at").desc(), "-id")[:limit]
    )


def runs_by_method() -> list[tuple[str, str, bool, int]]:
    """Published runs per measurement method, most first: (key, label, imported, runs), for
    the landing page's "where the runs come from"."""
    # A run's method is its stack's (part of the stack's identity): the stacks' stored counts
    # give the same figures without counting every run.
    counted = (
        Stack.objects.filter(published_run_count__gt=0)
        .values_list("method")
        .annotate(n=Sum("published_run_count"))
    )
    return [
        (key, methods.method_label(key), methods.is_imported(key), n)
        for key, n in sorted(counted, key=lambda item: (-item[1], item[0]))
    ]


def machine_count() -> int:
    """Hardware classes with published runs (the landing page's "hardware classes")."""
    return (
        Lane.objects.filter(hardware_class__isnull=False, run_count__gt=0)
        .values("hardware_class_id")
        .distinct()
        .count()
    )


def sort_label(key: str) -> str:
    return sort_spec(key)[0]


def account_runs_q(username: str, prefix: str = "submission__") -> Q:
    """Runs submitted by the account with this username."""
    return Q(**{f"{prefix}submitter__username": username})


def imported_runs_q(name: str, prefix: str = "submission__") -> Q:
    """Runs imported under this author's name (no account: an account never shares them)."""
    return Q(**{f"{prefix}submitter__isnull": True, f"{prefix}submitter_name": name})
