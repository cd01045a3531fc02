"""Read queries behind the public pages: one representative run per stack, facets, feeds."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import Count, F, OrderBy, Q, Window
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce, RowNumber

from leaderboard.filters import PAGE_SIZE, SORTS, BoardFilters
from runs.models import Hardware, Run, RunQuerySet, ScoreScale, Stack

# Columns of the narrow per-stack list: enough to sort, count, paginate and draw the scatter.
NARROW = (
    "id",
    "stack_id",
    "stack_runs",
    "quality_score",
    "decode_tps_median",
    "stack__model_id",
    "stack__quantization",
    "stack__engine",
)
EXPORT_LIMIT = 5000


def rank_order(scale: str) -> list[OrderBy]:
    """How a stack's runs are ranked against each other; ties go to the newest run.

    Matches runs.services' choice of Stack.best_run, so both paths show the same run.
    """
    first = "decode_tps_median" if scale == ScoreScale.SPEED_ONLY else "overall_score"
    return [F(first).desc(nulls_last=True), F("started_at").desc(), F("id").asc()]


def board_order(filters: BoardFilters) -> list[OrderBy]:
    column = F(SORTS[filters.sort_key][0])
    primary = column.desc(nulls_last=True) if filters.descending else column.asc(nulls_last=True)
    return [primary, rank_order(filters.scale)[0], F("stack_id").asc()]


def hardware_ids(filters: BoardFilters) -> list[int] | None:
    """Hardware rows the hardware filters allow, or None when no hardware filter is set.

    Resolving them first (a small table) hands Postgres a literal id list, which it can
    estimate and serve from the run-by-hardware index instead of scanning every run.
    """
    q = Q()
    if filters.hardware:
        q &= Q(id=filters.hardware)
    if filters.vendor:
        q &= Q(gpu_vendor=filters.vendor)
    if filters.gpu:
        q &= Q(gpu_model=filters.gpu)
    if filters.vram:
        q &= Q(vram_bucket=filters.vram)
    if filters.ram:
        q &= Q(ram_bucket=filters.ram)
    if filters.cpu and filters.apple:
        q &= Q(accelerator="cpu") | Q(gpu_vendor="apple")
    elif filters.cpu:
        q &= Q(accelerator="cpu")
    elif filters.apple:
        q &= Q(gpu_vendor="apple")
    if not q:
        return None
    return list(Hardware.objects.filter(q).values_list("id", flat=True))


def matching_runs(filters: BoardFilters) -> RunQuerySet:
    """Published runs on the view's scale that pass every filter."""
    runs = Run.objects.published().on_scale(filters.scale).filter(filters.stack_q())
    if filters.comparable_only:
        runs = runs.comparable()
    if filters.q:
        # Two small lookups instead of ILIKE across a three-table join for every run.
        text = filters.q
        stacks = Stack.objects.filter(
            Q(model_id__icontains=text) | Q(engine__icontains=text) | Q(quantization__iexact=text)
        ).values_list("id", flat=True)
        machines = Hardware.objects.filter(
            Q(gpu_model__icontains=text) | Q(cpu_model__icontains=text)
        ).values_list("id", flat=True)
        runs = runs.filter(Q(stack_id__in=list(stacks)) | Q(hardware_id__in=list(machines)))
    return restrict_runs(runs, filters)


def restrict_runs(runs: RunQuerySet, filters: BoardFilters) -> RunQuerySet:
    """Apply the filters that say where and how a run was measured (hardware, profile, date)."""
    ids = hardware_ids(filters)
    if ids is not None:
        runs = runs.filter(hardware_id__in=ids)
    return filters.apply_to_runs(runs)


def _id_in(ids: list[int]) -> Q:
    """id IN ids; on Postgres as one array parameter, which plans in a fraction of a
    millisecond where a literal list of thousands of ids takes longer to plan than to run."""
    if connection.vendor == "postgresql":
        return Q(id__in=RawSQL("SELECT unnest(%s::bigint[])", (ids,)))
    return Q(id__in=ids)


def _narrow(filters: BoardFilters) -> RunQuerySet:
    """One run per stack (best or median), as narrow rows in display order.

    The common view (v3, comparable, best run, no run-level filter) reads the best run that
    runs.services keeps on each stack: an explicit id list lets Postgres fetch those rows by
    primary key instead of scanning every run. Any filter that changes which of a stack's runs
    qualify ranks the matching runs per stack with a window function instead.
    """
    if not filters.run_level:
        best = Stack.objects.filter(filters.stack_q(prefix=""), best_run__isnull=False)
        runs = (
            Run.objects.published()
            .comparable()
            .on_scale(ScoreScale.V3)
            .filter(_id_in(list(best.values_list("best_run_id", flat=True))))
            .annotate(stack_runs=F("stack__published_run_count"))
        )
    else:
        runs = matching_runs(filters).annotate(
            place=Window(
                RowNumber(), partition_by=[F("stack_id")], order_by=rank_order(filters.scale)
            ),
            stack_runs=Window(Count("id"), partition_by=[F("stack_id")]),
        )
        if filters.mode == "median":
            # The middle run by rank (the better of the two middles for an even count).
            runs = runs.filter(place=(F("stack_runs") + 1) / 2)
        else:
            runs = runs.filter(place=1)
    return runs.order_by(*board_order(filters))


@dataclass
class Board:
    page: Page
    rows: list[Run]
    points: list[dict]

    @property
    def total(self) -> int:
        return self.page.paginator.count


def _runs_in_order(narrow_rows: list[tuple]) -> list[Run]:
    ids = [row[0] for row in narrow_rows]
    counts = {row[0]: row[2] for row in narrow_rows}
    by_id = Run.objects.select_related("stack", "hardware").in_bulk(ids)
    rows = []
    for run_id in ids:
        run = by_id.get(run_id)
        if run is not None:
            run.stack_runs = counts[run_id]
            rows.append(run)
    return rows


def board(filters: BoardFilters, *, scatter_limit: int = 300) -> Board:
    """The page of rows the filters ask for, plus the scatter's points (two or three queries)."""
    narrow_rows = list(_narrow(filters).values_list(*NARROW))
    page = Paginator(narrow_rows, PAGE_SIZE).get_page(filters.page)
    points = [
        dict(zip(NARROW, row, strict=True)) for row in narrow_rows if row[3] is not None and row[4]
    ][:scatter_limit]
    return Board(page=page, rows=_runs_in_order(list(page.object_list)), points=points)


def board_export_rows(filters: BoardFilters) -> list[Run]:
    """Every row of the filtered view in display order (capped), for CSV/JSON/Markdown."""
    narrow_rows = list(_narrow(filters).values_list(*NARROW)[:EXPORT_LIMIT])
    return _runs_in_order(narrow_rows)


def facets() -> dict:
    """Values offered by the filter menus: only what appears on published stacks."""
    stack_rows = (
        Stack.objects.filter(published_run_count__gt=0)
        .values_list("engine", "quantization", "model_family", "harness")
        .distinct()
    )
    engines, quants, families, harnesses = set(), set(), set(), set()
    for engine, quant, family, harness in stack_rows:
        engines.add(engine)
        quants.add(quant)
        families.add(family)
        harnesses.add(harness)
    gpus = Hardware.objects.exclude(gpu_model="").values_list("gpu_vendor", "gpu_model").distinct()
    return {
        "engines": sorted(e for e in engines if e),
        "quants": sorted(q for q in quants if q),
        "families": sorted(f for f in families if f),
        "harnesses": sorted(h for h in harnesses if h),
        "gpus": sorted({model for _vendor, model in gpus}),
    }


def newest_approved(filters: BoardFilters, limit: int = 50) -> RunQuerySet:
    """Recently approved runs matching the filters, newest decision first (the Atom feed)."""
    return (
        matching_runs(filters)
        .annotate(approved_at=Coalesce("submission__decided_at", "created_at"))
        .select_related("stack", "hardware", "submission", "submission__submitter")
        .order_by(F("approved_at").desc(), "-id")[:limit]
    )


def account_runs_q(username: str, prefix: str = "submission__") -> Q:
    """Runs submitted by the account with this username."""
    return Q(**{f"{prefix}submitter__username": username})


def imported_runs_q(name: str, prefix: str = "submission__") -> Q:
    """Runs imported under this author's name (no account: an account never shares them)."""
    return Q(**{f"{prefix}submitter__isnull": True, f"{prefix}submitter_name": name})
