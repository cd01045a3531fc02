"""Hardware lanes: each stack's published figures per hardware class, score scale and version.

A lane is computed from the stack's published runs with one query per batch of stacks (and
one for the attempts), grouped here. Speed figures belong to their hardware class; the pooled
lane (no class) carries quality only, which does not depend on the machine.

`aggregate` is the one rule for a lane's figures, its best run and its counts: the stored lanes
use it, and so do the pages that read runs themselves (runs.lane_rows) and the run-filtered
boards (leaderboard.rows).

The functions take the model classes (LaneModels) so that the data migration can run them on
its historical models; runs.services passes the live ones (so this module imports no model).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Case, Count, F, Q, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from runs.figures import Interval

# Stacks refreshed per round of queries: bounded memory however many runs each has.
BATCH_STACKS = 400
SCORED = ("v3", "v2")  # scales with a quality score: the ones with a pooled lane
FIGURES = ("quality", "overall", "decode", "prefill", "ttft")
# The figures that exist only on one hardware class: speed, and the overall score, which
# includes speed.
SPEED_FIGURES = ("overall", "decode", "prefill", "ttft")

LaneKey = tuple[int, int | None, str, str]  # stack, hardware class (None: pooled), scale, version
ClassBoardKey = tuple[int, str, str]  # one class's board: hardware class, scale, version


@dataclass(frozen=True)
class LaneModels:
    run: Any
    lane: Any
    hardware_class: Any


@dataclass(frozen=True, slots=True)
class LaneRun:
    """One counted run as its lane reads it: from the stored runs (refresh_lanes), a row of run
    values (runs.lane_rows) or a run-filtered board's tuple (leaderboard.rows)."""

    id: int
    overall: float | None
    quality: float | None
    decode: float | None
    prefill: float | None
    ttft: float | None
    started_at: datetime
    # Who uploaded it, counted once per lane; None is not counted.
    submitter: Hashable | None = None
    # The caller's own record of the run, handed back as the lane's best.
    source: Any = None


@dataclass(frozen=True)
class LaneFigures:
    """A lane's figures from its counted runs (`aggregate`)."""

    runs: int
    submitters: int
    best: LaneRun
    best_score: float | None  # the best run's best_figure
    figures: dict[str, Interval]  # every name of FIGURES; Interval(0) where not computed


def best_figure(scale: str, *, pooled: bool) -> str:
    """The figure a lane's best run is picked by (runs.models.Lane.best_score): decode speed on
    the speed-only scale, quality on the pooled lane (speed differs between machines), and the
    overall score otherwise, as runs.services picks a stack's best run."""
    if scale == "speed":
        return "decode"
    return "quality" if pooled else "overall"


def aggregate(
    runs: Sequence[LaneRun], *, scale: str, pooled: bool, figures: Iterable[str] = FIGURES
) -> LaneFigures:
    """A lane's figures from its counted runs (at least one): each of `figures` is its runs'
    median with its interval (runs.figures.Interval), the others are Interval(0); the best run
    has the highest best_figure, ties going to the newest run, then the lowest id."""
    attribute = best_figure(scale, pooled=pooled)

    def order(run: LaneRun) -> tuple[bool, float, float, int]:
        value = getattr(run, attribute)
        return (value is None, -(value or 0.0), -run.started_at.timestamp(), run.id)

    best = min(runs, key=order)
    wanted = set(figures)
    return LaneFigures(
        runs=len(runs),
        submitters=len({run.submitter for run in runs if run.submitter is not None}),
        best=best,
        best_score=getattr(best, attribute),
        figures={
            name: Interval.of(getattr(run, name) for run in runs) if name in wanted else Interval(0)
            for name in FIGURES
        },
    )


def version_column(score_scale: str) -> str:
    """The run field a lane of this scale is versioned by. A quality score compares only within
    its suite's version (the benchmark version); a speed compares across benchmark versions as
    long as the speed method did not change, so the speed-only scale is versioned by the
    method's version (Run.speed_version, runs.methods.speed_version)."""
    return "speed_version" if score_scale == "speed" else "benchmark_version"


def lane_version(run: Any) -> str:
    """The version a run's lanes are keyed by (version_column), of a stored Run or of a row of
    its values (a mapping with score_scale and the version fields)."""
    if isinstance(run, Mapping):
        return run.get(version_column(run["score_scale"])) or ""
    return getattr(run, version_column(run.score_scale)) or ""


def ranked_version(run_model: Any) -> Any:
    """version_column as a query expression over runs of every scale. A data migration's
    historical Run from before speed versions has only the benchmark version."""
    fields = {f.name for f in run_model._meta.concrete_fields}
    if "speed_version" not in fields:
        return F("benchmark_version")
    return Case(When(score_scale="speed", then=F("speed_version")), default=F("benchmark_version"))


def counts_in_lane(score_scale: str, comparable: bool) -> bool:
    """Only like is ranked with like: a v3 run counts in a lane only if it is comparable
    (counted_runs is this rule as a query)."""
    return score_scale != "v3" or comparable


def counted_runs(run_model: Any) -> Any:
    """The runs a lane's figures come from: published, and on the v3 scale comparable (a v3
    run that skipped tasks is not ranked; the legacy and speed-only scales have no coverage
    rule). Every run of a lane, counted or not, is an attempt."""
    return run_model.objects.filter(published=True).filter(
        Q(comparable=True) | ~Q(score_scale="v3")
    )


def refresh_lanes(
    stack_ids: Iterable[int], *, models: LaneModels, changed: set[ClassBoardKey] | None = None
) -> int:
    """Recompute the lanes of these stacks from their runs; the number of lanes kept. The
    class boards whose lanes were written or deleted are added to `changed`.

    Call inside a transaction that holds the stacks (runs.services.refresh_stack_stats locks
    their rows), so two refreshes of one stack do not interleave.
    """
    ids = sorted(set(stack_ids))
    kept = 0
    changed = set() if changed is None else changed
    for start in range(0, len(ids), BATCH_STACKS):
        kept += _refresh_batch(ids[start : start + BATCH_STACKS], models, changed)
    return kept


def _refresh_batch(ids: list[int], models: LaneModels, changed: set[ClassBoardKey]) -> int:
    """One batch of stacks. Lanes whose figures did not change keep their rows; changed ones
    are written again, with INSERTs (an UPDATE of many rows with different values costs
    Django's bulk_update a CASE per column, quadratic in the batch)."""
    now = timezone.now()
    no_speed = set(
        models.hardware_class.objects.filter(kind="unknown").values_list("id", flat=True)
    )
    attempts = _attempts(ids, models)
    # Speed is a hardware class's: none on the pooled lane, none on unknown hardware.
    measured = {key: key[1] is not None and key[1] not in no_speed for key in attempts}
    wanted = {
        key: _figures(key, rows, attempts.get(key, 0), speed=measured.get(key, False))
        for key, rows in _grouped_rows(ids, models).items()
    }
    # A data migration runs this on its historical Lane, which may lack later figures.
    present = {f.attname for f in models.lane._meta.concrete_fields}
    fields = [name for name in FIELDS if name in present]
    wanted = {
        key: {k: v for k, v in found.items() if k in present} for key, found in wanted.items()
    }
    total, stale = len(wanted), []
    stored = models.lane.objects.filter(stack_id__in=ids).values("id", *KEY_FIELDS, *fields)
    for lane in stored:
        key = tuple(lane[name] for name in KEY_FIELDS)
        figures = wanted.get(key)
        if figures is not None and all(lane[name] == value for name, value in figures.items()):
            del wanted[key]  # unchanged
        else:
            stale.append(lane["id"])
            changed.update(_boards([key]))
    changed.update(_boards(wanted))
    if stale:
        models.lane.objects.filter(pk__in=stale).delete()
    models.lane.objects.bulk_create(
        [
            models.lane(
                stack_id=key[0],
                hardware_class_id=key[1],
                score_scale=key[2],
                benchmark_version=key[3],
                refreshed_at=now,
                **figures,
            )
            for key, figures in wanted.items()
        ],
        batch_size=1000,
    )
    return total


def _boards(keys: Iterable[tuple[Any, ...]]) -> set[ClassBoardKey]:
    """The class boards of these lane keys (a pooled lane is on none)."""
    return {(klass, scale, version) for _stack, klass, scale, version in keys if klass is not None}


KEY_FIELDS = ("stack_id", "hardware_class_id", "score_scale", "benchmark_version")
FIELDS = (
    "run_count",
    "submitter_count",
    "attempt_count",
    "best_run_id",
    "best_score",
    *(f"{name}_{part}" for name in FIGURES for part in ("median", "low", "high")),
)


def _grouped_rows(ids: list[int], models: LaneModels) -> dict[LaneKey, list[LaneRun]]:
    """Each lane's counted runs: every run in its class's lane, scored ones also pooled."""
    rows = (
        counted_runs(models.run)
        .filter(stack_id__in=ids)
        .annotate(
            decode=Coalesce("decode_tps_median", "decode_tps_mean"),
            prefill=Coalesce("prefill_tps_median", "prefill_tps_mean"),
            ttft=Coalesce("ttft_ms_median", "ttft_ms_mean"),
            lane_version=ranked_version(models.run),
        )
        .values_list(
            "stack_id",
            "hardware_class_id",
            "score_scale",
            "lane_version",
            "id",
            "overall_score",
            "quality_score",
            "decode",
            "prefill",
            "ttft",
            "started_at",
            "submission__submitter_id",
            "submission__submitter_name",
        )
        .order_by()
        .iterator(chunk_size=5000)
    )
    grouped: dict[LaneKey, list[LaneRun]] = defaultdict(list)
    for stack, klass, scale, version, run_id, overall, quality, *speed, started, user, name in rows:
        # Counted as Stack.submitter_count counts them: accounts, and imported names.
        who = ("user", user) if user is not None else ("name", name) if name is not None else None
        decode, prefill, ttft = speed
        row = LaneRun(run_id, overall, quality, decode, prefill, ttft, started, who)
        if klass is not None:
            grouped[(stack, klass, scale, version)].append(row)
        if scale in SCORED:
            grouped[(stack, None, scale, version)].append(row)
    return grouped


def _attempts(ids: list[int], models: LaneModels) -> dict[LaneKey, int]:
    """Every submission per lane, whatever became of it (flagged, rejected, withdrawn, failed)."""
    counts: dict[LaneKey, int] = defaultdict(int)
    rows = (
        models.run.objects.filter(stack_id__in=ids)
        .annotate(lane_version=ranked_version(models.run))
        .values_list("stack_id", "hardware_class_id", "score_scale", "lane_version")
        .annotate(n=Count("submission"))
        .order_by()
    )
    for stack, klass, scale, version, n in rows:
        if klass is not None:
            counts[(stack, klass, scale, version)] += n
        if scale in SCORED:
            counts[(stack, None, scale, version)] += n
    return counts


def _figures(key: LaneKey, rows: list[LaneRun], attempts: int, *, speed: bool) -> dict[str, Any]:
    """A lane's fields from its counted runs (speed figures only where `speed`)."""
    names = FIGURES if speed else tuple(n for n in FIGURES if n not in SPEED_FIGURES)
    found = aggregate(rows, scale=key[2], pooled=key[1] is None, figures=names)
    figures: dict[str, Any] = {
        "run_count": found.runs,
        "submitter_count": found.submitters,
        "attempt_count": max(attempts, found.runs),
        "best_run_id": found.best.id,
        "best_score": found.best_score,
    }
    for name, interval in found.figures.items():
        for part in ("median", "low", "high"):
            figures[f"{name}_{part}"] = getattr(interval, part)
    return figures
