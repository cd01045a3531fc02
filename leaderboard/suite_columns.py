"""Per-suite columns on the board (issue 29): a lane's figure for one quality suite.

A visitor picks columns (``?cols=toolcall,coding``) and may sort by one (``?sort=suite:coding``).
A suite's figure follows the board's one rule (runs.figures.Interval): the median of the lane's
runs' scores on that suite, its n, and a 95% interval from three runs. The runs are the lane's
own (runs.lanes.counted_runs on the view's scale and version), or, on a run-filtered view, the
runs that match the filters, as the row's other figures are. The suites that measure speed
are never a column (worker.rules.scoring.SPEED_SUITES; a test holds it): a pooled row would
mix machines.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from itertools import groupby
from typing import Any, Protocol, TypeVar

from django.db.models import QuerySet

from runs.figures import Interval, settled
from runs.lanes import counted_runs, version_column
from runs.models import Lane, Run, SuiteResult


# What this module reads of the board's filters, scope and rows (leaderboard.filters.BoardFilters,
# leaderboard.scopes.Scope, leaderboard.rows.Row), which import this module: described here,
# not imported, so the package has no import cycle.
class BoardFilters(Protocol):
    @property
    def scale(self) -> str: ...
    @property
    def suites(self) -> list[str]: ...
    @property
    def sort_suite(self) -> str: ...
    @property
    def descending(self) -> bool: ...


class Scope(Protocol):
    @property
    def pooled(self) -> bool: ...
    @property
    def grouped(self) -> bool: ...


class Row(Protocol):
    @property
    def stack_id(self) -> int: ...
    @property
    def hardware_class_id(self) -> int | None: ...

    suites: dict[str, Interval | None]


# The quality suites a column can show, in the order columns appear: (label, header title).
# The agent-program matrix suites have their own page (leaderboard.matrix), not a column.
SUITE_COLUMNS: dict[str, tuple[str, str]] = {
    "toolcall": ("Tool calls", "Single-turn tool choice and arguments, and abstaining"),
    "coding": ("Coding", "Write or fix small Python functions, checked by hidden tests"),
    "agent": ("Agent loop", "Multi-turn tool loop with deterministic tools"),
    "longcontext": ("Long context", "Needle retrieval at about 2K to 32K prompt tokens"),
    "instructfollow": ("Instructions", "Format, count and order constraints checked by rules"),
    "dataextract": ("Extraction", "JSON extraction from messy text, per field"),
    "reasonmath": ("Reasoning", "Practical arithmetic and logic with a checked answer"),
    "loop_code_fix": ("Code fix", "Fix a small buggy module; its checks decide"),
    "loop_schema": ("JSON schema", "JSON that satisfies a schema and its content rules"),
}
SORT_PREFIX = "suite:"
MISSING_TITLE = "No run of this lane has this suite"

# A lane's key on the board: (stack id, hardware class id, or None on the pooled view).
RowKey = tuple[int, int | None]
# {row key: {suite: its figure}}, for the rows that have a run of the suite.
SuiteFigures = dict[RowKey, dict[str, Interval]]
T = TypeVar("T")


def parse_cols(values: Iterable[str]) -> str:
    """The columns asked for (repeated ``cols`` or comma-separated), known names only, in the
    board's order, comma-joined: the canonical URL value ("" for none)."""
    asked = {name.strip() for value in values for name in value.split(",")}
    return ",".join(name for name in SUITE_COLUMNS if name in asked)


def sort_suite(key: str) -> str:
    """The suite a sort key orders by ("suite:coding" -> "coding"), or ""."""
    if key.startswith(SORT_PREFIX) and key[len(SORT_PREFIX) :] in SUITE_COLUMNS:
        return key[len(SORT_PREFIX) :]
    return ""


def sort_spec(key: str) -> tuple[str, bool, str]:
    """(label, higher is better, kind) of a suite sort key, as filters.SORTS gives the others."""
    return (SUITE_COLUMNS[sort_suite(key)][0], True, "suite")


def figures(runs: QuerySet[Run], suites: Iterable[str], *, pooled: bool) -> SuiteFigures:
    """{(stack, class): {suite: Interval}} over these runs (one query). On the pooled view a
    stack's runs on every class make one row, as its quality does."""
    wanted = [name for name in suites if name in SUITE_COLUMNS]
    if not wanted:
        return {}
    scores: dict[tuple[RowKey, str], list[float | None]] = defaultdict(list)
    found = SuiteResult.objects.filter(run__in=runs, suite__in=wanted).values_list(
        "run__stack_id", "run__hardware_class_id", "suite", "score"
    )
    for stack_id, class_id, suite, score in found.order_by():
        scores[((stack_id, None if pooled else class_id), suite)].append(score)
    out: SuiteFigures = defaultdict(dict)
    for (key, suite), values in scores.items():
        figure = Interval.of(values)
        if figure.median is not None:  # runs whose suite has no score show "—", as none
            out[key][suite] = figure
    return out


def attach(rows: Iterable[Row], found: SuiteFigures, names: list[str]) -> None:
    """Each board row's figures for these suite columns (None where it has no run of one)."""
    for row in rows:
        mine = found.get((row.stack_id, row.hardware_class_id), {})
        row.suites = {name: mine.get(name) for name in names}


def lane_figures(
    keys: list[RowKey], filters: BoardFilters, scope: Scope, version: str
) -> SuiteFigures:
    """figures() of these stored lanes' rows (leaderboard.queries: the view's filters, scope)."""
    runs = lane_runs(keys, scale=filters.scale, version=version, pooled=scope.pooled)
    return figures(runs, filters.suites, pooled=scope.pooled)


def sorted_lanes(
    lanes: QuerySet[Lane],
    columns: tuple[str, ...],
    filters: BoardFilters,
    scope: Scope,
    version: str,
    *,
    limit: int = 0,
) -> tuple[list[tuple[Any, ...]], SuiteFigures]:
    """A board's lanes (queries.lanes, in the view's default order) as `columns` (with
    "stack_id"), ordered by the suite sorted by, and the suite figures found; in a view of
    several classes each class's lanes are ranked among themselves (a rank ends each row)."""
    found = list(lanes.values_list(*columns, "hardware_class_id"))
    stack = columns.index("stack_id")
    keys = [(row[stack], None if scope.pooled else row[-1]) for row in found]
    by_row = lane_figures(keys, filters, scope, version)
    suite = filters.sort_suite
    out: list[tuple[Any, ...]] = []  # the caller's columns: values_list types them no further
    # Each class's lanes are consecutive (queries.lanes orders a grouped view by class).
    pairs = zip(found, keys, strict=True)
    for _class, group in groupby(pairs, key=lambda p: p[1][1] if scope.grouped else 0):
        ordered = order(
            list(group), lambda p: by_row.get(p[1], {}).get(suite), descending=filters.descending
        )
        for rank, (row, _key) in enumerate(ordered, start=1):
            out.append((*row[: len(columns)], rank) if scope.grouped else row[: len(columns)])
    return out[: limit or None], by_row


def lane_runs(keys: Iterable[RowKey], *, scale: str, version: str, pooled: bool) -> QuerySet[Run]:
    """The runs the stored lanes of these rows are computed from (runs.lanes.counted_runs)."""
    keys = list(keys)
    runs: QuerySet[Run] = counted_runs(Run).filter(
        score_scale=scale,
        stack_id__in={stack for stack, _ in keys},
        **{version_column(scale): version},
    )
    if not pooled:
        runs = runs.filter(hardware_class_id__in={klass for _, klass in keys})
    return runs


def order(
    items: list[T], figure_of: Callable[[T], Interval | None], *, descending: bool
) -> list[T]:
    """Items by one suite's median, with the board's settled-first rule: rows whose suite figure
    has three runs or more, then those of one or two, then rows without the suite (runs.figures
    .settled). Ties keep the order given (the view's default)."""

    def key(item: T) -> tuple[int, float]:
        found = figure_of(item)
        if found is None or found.median is None:
            return (2, 0.0)
        return (0 if settled(found.n) else 1, -found.median if descending else found.median)

    return sorted(items, key=key)
