"""Leaderboard rows: one stack on one hardware class (a lane), or one stack on all hardware.

A row's figures are its runs' medians (runs.figures.Interval), with a 95% interval from three
runs; a row of one or two runs shows its median with "1 run" or "2 runs" and ranks after the
rows that have three or more. The best run's overall score is evidence ("best of N") and never
orders the rows. Rows come from the stored lanes (runs.models.Lane), or, when a filter picks
among a lane's runs (profile, date, verified...), from the matching runs themselves through
`aggregate`, which applies the same rule (runs.lanes.aggregate). The pooled all-hardware row
carries quality only: speed, and any score that includes speed, exists only per hardware class.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from django.db.models import Case, F, Value, When

from leaderboard import suite_columns
from leaderboard.filters import ranks_by_figure
from runs.figures import Interval, settled
from runs.lanes import LaneRun
from runs.lanes import aggregate as lane_figures
from runs.models import HardwareClass, Lane, Run, ScoreScale, Stack
from worker.rules.stats import MIN_MEDIAN_N

FIGURES = ("overall", "quality", "decode", "prefill", "ttft")
SPEED_FIGURES = ("decode", "prefill", "ttft")


# One column of a row: the lane's median over n runs, with its 95% interval from three.
Figure = Interval


def shown(found: Interval) -> Figure | None:
    """The figure a row shows, or None where its runs have no value for it."""
    return None if found.median is None else found


@dataclass
class Row:
    """A ranked row; `stack`, `hardware_class` and `best_run` are filled for the shown page."""

    stack_id: int
    hardware_class_id: int | None
    best_run_id: int | None
    runs: int
    submitters: int
    attempts: int
    # The best run's overall score: evidence ("best of N"), never the order of the rows.
    best_overall: float | None = None
    figures: dict[str, Figure | None] = field(default_factory=dict)
    # Per-suite figures of the columns the view shows (leaderboard.suite_columns): None where
    # no run of the row has that suite.
    suites: dict[str, Figure | None] = field(default_factory=dict)
    started_at: datetime | None = None
    lane_id: int | None = None
    stack: Stack | None = None
    hardware_class: HardwareClass | None = None
    best_run: Run | None = None
    matrix_url: str = ""  # the model's harness matrix on this class, where it has one
    # A view of several classes ranks each class's rows among themselves (speed never across
    # machines): the row's place within its class; None where one ranking covers the view.
    rank: int | None = None
    # The first row of one or two runs under settled rows of its class (mark_tiers).
    starts_few: bool = False

    @property
    def pooled(self) -> bool:
        return self.hardware_class_id is None

    @property
    def few_runs(self) -> bool:
        """One or two runs: a median with no interval, ranked after the settled rows."""
        return self.runs < MIN_MEDIAN_N

    @property
    def best_of(self) -> int:
        """How many uploads the shown best run was picked from (at least the runs shown)."""
        return max(self.attempts, self.runs)

    overall = property(lambda self: self.figures.get("overall"))
    quality = property(lambda self: self.figures.get("quality"))
    decode = property(lambda self: self.figures.get("decode"))
    prefill = property(lambda self: self.figures.get("prefill"))
    ttft = property(lambda self: self.figures.get("ttft"))


# --- rows from stored lanes -----------------------------------------------------------------

# The value a lane shows and ranks by for each figure: its median (every lane with a run
# has one; runs.figures).
LANE_VALUES = {name: F(f"{name}_median") for name in FIGURES}
# Sort key -> lane column (after LANE_VALUES are annotated as value_<figure>).
LANE_SORTS = {
    **{name: f"value_{name}" for name in FIGURES},
    "runs": "run_count",
    "submitters": "submitter_count",
    "model": "stack__model_id",
    "quant": "stack__quantization",
    "engine": "stack__engine",
    "hardware": "hardware_class__label",
    "date": "best_run__started_at",
}
# Lanes of one or two runs rank after the settled ones when a figure orders the rows.
LANE_TIER = Case(When(run_count__gte=MIN_MEDIAN_N, then=Value(0)), default=Value(1))


def from_lane(lane: Lane, *, scale: str) -> Row:
    """A Row from a Lane fetched with its stack, class and best run."""
    run = lane.best_run
    figures: dict[str, Figure | None] = {}
    for name in _figures_for(scale, pooled=lane.hardware_class_id is None):
        median = getattr(lane, f"{name}_median")
        figures[name] = shown(
            Interval(
                lane.run_count, median, getattr(lane, f"{name}_low"), getattr(lane, f"{name}_high")
            )
        )
    pooled = lane.hardware_class_id is None
    return Row(
        stack_id=lane.stack_id,
        hardware_class_id=lane.hardware_class_id,
        best_run_id=lane.best_run_id,
        runs=lane.run_count,
        submitters=lane.submitter_count,
        attempts=lane.attempt_count,
        best_overall=None if pooled or run is None else run.overall_score,
        figures=figures,
        started_at=run.started_at if run else None,
        lane_id=lane.id,
        stack=lane.stack,
        hardware_class=lane.hardware_class,
        best_run=run,
    )


def _figures_for(scale: str, *, pooled: bool) -> tuple[str, ...]:
    if pooled:
        return () if scale == ScoreScale.SPEED_ONLY else ("quality",)
    return SPEED_FIGURES if scale == ScoreScale.SPEED_ONLY else FIGURES


# --- rows from matching runs ----------------------------------------------------------------

# What `aggregate` reads of each run, in this order (see queries.run_values).
RUN_COLUMNS = (
    "id",
    "stack_id",
    "hardware_class_id",
    "overall_score",
    "quality_score",
    "decode",
    "prefill",
    "ttft",
    "started_at",
    "submitter",  # optional: without it, submitters are counted later (queries.py)
)


def aggregate(runs: Iterable[tuple[Any, ...]], *, scale: str, pooled: bool) -> list[Row]:
    """One Row per lane (stack × hardware class, or per stack when pooled) of these runs, by
    the stored lanes' rule (runs.lanes.aggregate)."""
    groups: dict[tuple[int, int | None], list[LaneRun]] = {}
    for run in runs:
        run_id, _, _, overall, quality, decode, prefill, ttft, started, *who = run
        submitter = who[0] if who else None  # the optional last column
        found = LaneRun(run_id, overall, quality, decode, prefill, ttft, started, submitter)
        groups.setdefault((run[1], None if pooled else run[2]), []).append(found)
    names = _figures_for(scale, pooled=pooled)
    rows = []
    for (stack_id, class_id), members in groups.items():
        lane = lane_figures(members, scale=scale, pooled=pooled, figures=names)
        rows.append(
            Row(
                stack_id=stack_id,
                hardware_class_id=class_id,
                best_run_id=lane.best.id,
                runs=lane.runs,
                submitters=lane.submitters,
                attempts=lane.runs,
                best_overall=None if pooled else lane.best.overall,
                figures={name: shown(lane.figures[name]) for name in names},
                started_at=lane.best.started_at,
            )
        )
    return rows


def python_sort_value(row: Row, key: str) -> float | str | None:
    """The value a Row sorts by, matching LANE_SORTS for rows that came from stored lanes."""
    if key in FIGURES:
        figure = row.figures.get(key)
        return figure.value if figure else None
    if key in ("model", "quant", "engine"):
        stack = row.stack
        assert stack is not None, "attach() gives every row its stack"
        return {"model": stack.model_id, "quant": stack.quantization, "engine": stack.engine}[
            key
        ].lower()
    if key == "hardware":
        return row.hardware_class.label.lower() if row.hardware_class else ""
    if key == "date":
        return row.started_at.timestamp() if row.started_at else None
    return {"runs": row.runs, "submitters": row.submitters}[key]


def sort_rows(rows: list[Row], key: str, *, descending: bool, tie: str) -> list[Row]:
    """Rows in display order (as queries.lanes orders lanes in SQL): by the key, then by the
    view's default figure, then by stack and class; missing values last either way. When a
    figure orders the rows, those of three runs or more come first (runs.figures.settled)."""
    if suite := suite_columns.sort_suite(key):
        # Ties keep the view's default order (as queries.lanes gives it); a suite's figure has
        # its own n (the runs that have the suite), which sets its tier.
        rows = sort_rows(rows, tie, descending=True, tie=tie)
        return suite_columns.order(rows, lambda r: r.suites.get(suite), descending=descending)
    rows = sorted(rows, key=lambda r: (r.stack_id, r.hardware_class_id or 0))
    for name, desc in ((tie, True), (key, descending)):
        present = [r for r in rows if python_sort_value(r, name) is not None]
        present.sort(key=lambda r: cast(float | str, python_sort_value(r, name)), reverse=desc)
        rows = present + [r for r in rows if python_sort_value(r, name) is None]
    if ranks_by_figure(key):
        rows.sort(key=lambda r: not settled(r.runs))  # stable: the order above within a tier
    return rows


def mark_tiers(rows: list[Row]) -> list[Row]:
    """Mark the first row of one or two runs after rows of three or more in the same class,
    where the page puts its "One or two runs" heading (nothing when no settled row is above)."""
    previous: Row | None = None
    for row in rows:
        row.starts_few = bool(
            row.few_runs
            and previous is not None
            and previous.hardware_class_id == row.hardware_class_id
            and not previous.few_runs
        )
        previous = row
    return rows


def by_class(rows: list[Row]) -> list[Row]:
    """Rows in display order grouped by hardware class (by its label), each class's rows in
    the order given and ranked from 1 among themselves."""
    grouped = sorted(
        rows,
        key=lambda r: (r.hardware_class.label if r.hardware_class else "", r.hardware_class_id),
    )
    places: dict[int | None, int] = {}
    for row in grouped:
        places[row.hardware_class_id] = row.rank = places.get(row.hardware_class_id, 0) + 1
    return grouped


def attach(
    rows: Sequence[Row],
    *,
    stacks: dict[int, Stack],
    classes: dict[int, HardwareClass],
    runs: dict[int, Run],
) -> list[Row]:
    """Fill each row's objects from id maps; rows whose stack is gone are dropped."""
    out = []
    for row in rows:
        row.stack = row.stack or stacks.get(row.stack_id)
        if row.stack is None:
            continue
        if row.hardware_class_id is not None and row.hardware_class is None:
            row.hardware_class = classes.get(row.hardware_class_id)
        if row.best_run_id is not None and row.best_run is None:
            row.best_run = runs.get(row.best_run_id)
        out.append(row)
    return out
