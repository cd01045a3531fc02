"""Which hardware a view is about: the classes the filters name, or the busiest class where
they name none, from the runs per class the class boards keep (leaderboard.models)."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from django.db.models import Q, Sum

from leaderboard import cache as board_cache
from leaderboard.filters import CLASS_NARROWING, BoardFilters
from leaderboard.models import ClassBoard
from runs import normalize
from runs.models import HardwareClass, HardwareKind, ScoreScale


@dataclass
class Scope:
    """The hardware classes a view ranks lanes on.

    `class_ids` None with `pooled` set is the all-hardware view (pooled lanes, quality only);
    None without it (feeds only) puts no restriction on the hardware."""

    class_ids: list[int] | None
    label: str
    pooled: bool = False
    default: bool = False  # the visitor named no hardware: the class with the most runs
    single: HardwareClass | None = None

    @property
    def empty(self) -> bool:
        return self.class_ids == [] and not self.pooled

    @property
    def grouped(self) -> bool:
        """Several classes in one view: each is ranked among itself, never against another."""
        return not self.pooled and self.single is None and bool(self.class_ids)


def vram_range(label: str) -> tuple[float, float]:
    """The (exclusive low, inclusive high) GB of a VRAM size choice (runs.normalize buckets)."""
    low = 0.0
    for upper, name in normalize.VRAM_BUCKETS:
        if name == label:
            return low, float(upper)
        low = float(upper)
    return low, math.inf


def _narrowing_q(filters: BoardFilters) -> Q:
    q = Q()
    if filters.vram:
        low, high = vram_range(filters.vram)
        q &= Q(kind=HardwareKind.GPU, memory_gb__gt=low)
        if high != math.inf:
            q &= Q(memory_gb__lte=high + 1e-6)
    kinds = {HardwareKind.CPU} if filters.cpu else set()
    kinds |= {HardwareKind.APPLE} if filters.apple else set()
    if filters.fits:
        # The stack ran in at most this much memory: GPUs and Apple chips unless a kind is named.
        q &= Q(memory_gb__lte=float(filters.fits) + 1e-6)
        kinds = kinds or {HardwareKind.GPU, HardwareKind.APPLE}
    if kinds:
        q &= Q(kind__in=sorted(kinds))
    if filters.vendor:
        q &= Q(vendor=filters.vendor)
    if filters.gpu:
        q &= Q(chip__iexact=filters.gpu) | Q(label__iexact=filters.gpu)
    if filters.hardware:
        q &= Q(machines__id=filters.hardware)
    return q


def default_class(scale: str) -> HardwareClass | None:
    """The hardware class with the most runs on this scale (the board's default view)."""
    found = _default_class_runs(scale)
    return found[0] if found else None


def _default_class_runs(scale: str) -> tuple[HardwareClass, int] | None:
    def compute() -> tuple[HardwareClass, int] | None:
        busiest = _busiest(scale)
        if busiest is None:
            return None
        return HardwareClass.objects.get(pk=busiest[0]), busiest[1]

    return board_cache.cached("default-class", scale, compute)


def _busiest(scale: str) -> tuple[int, int] | None:
    """(class id, runs) of the busiest class of this scale (class_runs' first), or None."""
    return next(iter(class_runs(scale).items()), None)


def class_runs(scale: str | None = None) -> Counter[int]:
    """Published runs per hardware class over its lanes (of one scale, or all), most first and
    the lower id first among equals."""
    by_scale = _runs_summary()
    if scale is not None:
        return by_scale.get(scale, Counter())
    total: Counter[int] = Counter()
    for runs in by_scale.values():
        total.update(runs)
    return Counter(dict(sorted(total.items(), key=lambda item: (-item[1], item[0]))))


def boards_fingerprint() -> str:
    """What the hardware classes' lanes are now, in one line, read from the class boards
    (leaderboard.models.ClassBoard) once a page version: their count, newest id and newest
    write. Every change to a class's lanes writes its board again in the same transaction
    (leaderboard.places.store_boards), a board whose lanes are all gone is deleted and ids are
    never handed out twice, so no two states of the lanes share a line; the newest write keeps
    a database rebuilt from scratch, whose ids start again, from meeting an earlier one's."""
    state = boards_state()
    return f"{state.boards}|{state.last}|{state.at}"


class BoardsState(NamedTuple):
    """The class boards now: how many, the newest id and write, and the lanes they rank."""

    boards: int
    last: int | None
    at: datetime | None
    lanes: int


def boards_state() -> BoardsState:
    """BoardsState, read once a page version (a row per class, scale and version)."""

    def compute() -> BoardsState:
        rows = list(ClassBoard.objects.values_list("id", "written_at", "ranked"))
        return BoardsState(
            len(rows),
            max((row[0] for row in rows), default=None),
            max((row[1] for row in rows if row[1] is not None), default=None),
            sum(sum((row[2] or {}).values()) for row in rows),
        )

    return board_cache.cached("boards-state", "", compute)


def _runs_summary() -> dict[str, Counter[int]]:
    """{scale: published runs per class}, for the default classes and the hardware menu: read
    from the class boards (leaderboard.models.ClassBoard, a row per class, scale and version,
    written with the lanes), once a page version."""

    def compute() -> dict[str, Counter[int]]:
        groups = (
            ClassBoard.objects.filter(run_count__gt=0)
            .values_list("score_scale", "hardware_class_id")
            .annotate(n=Sum("run_count"))
            .order_by()
        )
        found: dict[str, list[tuple[int, int]]] = {}
        for scale, class_id, runs in groups:
            found.setdefault(scale, []).append((class_id, runs))
        return {
            scale: Counter(dict(sorted(rows, key=lambda row: (-row[1], row[0]))))
            for scale, rows in found.items()
        }

    return board_cache.cached("class-runs", "", compute)


def default_scale() -> str:
    """The scale of the view a visitor sees before naming anything: ranked v3 where its busiest
    class has a few runs (or as many as speed only's), else speed only; legacy v2 only when
    neither has any. Real data arrives mostly as speeds alone, and a site opening on one v3 row
    would hide it."""
    current = (ScoreScale.V3, ScoreScale.SPEED_ONLY)
    runs = {scale: (_busiest(scale) or (0, 0))[1] for scale in current}
    if not any(runs.values()):
        return ScoreScale.V3 if _busiest(ScoreScale.V2) is None else ScoreScale.V2
    return prefer_v3(runs[ScoreScale.V3], runs[ScoreScale.SPEED_ONLY])


# Ranked v3 (quality and speed) is the board a visitor should see wherever it has a few rows to
# rank; below that, a class measured mostly for speed opens on its speed-only board.
V3_ENOUGH = 3


def prefer_v3(v3: int, speed: int) -> str:
    return ScoreScale.V3 if v3 >= V3_ENOUGH or v3 >= speed else ScoreScale.SPEED_ONLY


def hardware_scope(filters: BoardFilters, *, pick_default: bool = True) -> Scope:
    """The classes the filters name; with none named, the most common class (or, for feeds,
    `pick_default=False`, every class)."""
    if filters.pooled:
        return Scope(None, "All hardware", pooled=True)
    if filters.hw:
        found = HardwareClass.objects.filter(slug=filters.hw).first()
        if found is not None:
            return Scope([found.id], found.label, single=found)
        sized = sized_classes(filters.hw)
        if len(sized) == 1:
            return Scope([sized[0].id], sized[0].label, single=sized[0])
        if sized:
            return Scope([c.id for c in sized], " or ".join(c.label for c in sized))
        return Scope([], f"unknown hardware “{filters.hw}”")
    if filters.picks_hardware:
        return board_cache.cached(
            "scope",
            "|".join(str(getattr(filters, name)) for name in CLASS_NARROWING),
            lambda: _narrowed_scope(filters),
        )
    if not pick_default:
        return Scope(None, "any hardware")
    found = default_class(filters.scale)
    if found is None:
        return Scope([], "no hardware yet", default=True)
    return Scope([found.id], found.label, default=True, single=found)


def _narrowed_scope(filters: BoardFilters) -> Scope:
    classes = list(HardwareClass.objects.filter(_narrowing_q(filters)).distinct())
    labels = [label for name, label in filters.active() if name in CLASS_LABELLED]
    if len(classes) == 1:
        return Scope([classes[0].id], classes[0].label, single=classes[0])
    return Scope([c.id for c in classes], ", ".join(labels))


CLASS_LABELLED = ("vram", "fits", "hardware", "vendor", "gpu", "cpu", "apple")
_SIZE_SUFFIX = re.compile(r"[0-9]+(?:\.[0-9]+)?gb")


def sized_classes(model_slug: str) -> list[HardwareClass]:
    """The classes of one chip in every memory size: "rtx-4090" names "rtx-4090-24gb", and
    "apple-m2-max" both "apple-m2-max-64gb" and "apple-m2-max-96gb" (kept apart as lanes)."""
    found = HardwareClass.objects.filter(slug__startswith=f"{model_slug}-").order_by("slug")
    return [c for c in found if _SIZE_SUFFIX.fullmatch(c.slug[len(model_slug) + 1 :])]
