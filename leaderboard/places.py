"""A stack's place on each hardware class's board, as the stack and compare pages show it."""

from __future__ import annotations

from django.db import connection

from leaderboard import cache as board_cache
from leaderboard import scopes
from leaderboard.filters import UNVERSIONED, BoardFilters
from leaderboard.queries import lane_order, lanes
from leaderboard.scopes import Scope
from runs.models import Stack


def lane_places(
    stack: Stack, class_ids: list[int], scale: str, version: str
) -> dict[int, tuple[int, int]]:
    """{class id: (the stack's rank, rows ranked)} on each of these classes' boards, in the
    board's own order (its default sort, the stack's method): what the stack and compare pages
    say beside a lane's figures. Counted by the database and kept for as long as the lanes are
    what they were (scopes.lanes_fingerprint)."""
    classes = sorted(set(class_ids))
    view = f"{stack.id}|{stack.method}|{scale}|{version}"
    return board_cache.cached_by_content(
        "lane-places",
        f"{scopes.lanes_fingerprint()}|{view}|{classes}",
        lambda: _places_by_class(stack, classes, scale, version, view),
    )


def _places_by_class(
    stack: Stack, classes: list[int], scale: str, version: str, view: str
) -> dict[int, tuple[int, int]]:
    """After the lanes changed: each class's place kept by what that class's lanes are
    (scopes.class_lanes_marks), so a publish has them counted again on the classes it touched
    alone. Counting them on every class of a stack reads every lane of them (65 ms for the
    busiest stack at 1,000,000 runs: 8 ms a class, and 10 ms for the marks)."""
    marks = scopes.class_lanes_marks(classes, scale, version)

    def count(missing: list[int]) -> dict[int, tuple[int, int] | tuple[()]]:
        counted = _count_places(stack, missing, scale, version)
        return {class_id: counted.get(class_id, ()) for class_id in missing}

    found = board_cache.cached_by_content_each(
        "lane-place",
        {class_id: f"{marks.get(class_id)}|{class_id}|{view}" for class_id in classes},
        count,
    )
    return {class_id: place for class_id, place in found.items() if place}


def _count_places(
    stack: Stack, classes: list[int], scale: str, version: str
) -> dict[int, tuple[int, int]]:
    filters = BoardFilters(
        scale=scale, bv=version or UNVERSIONED, method=stack.method, scale_named=True
    )
    scope = Scope(classes, "", single=None)
    order = lane_order(filters)
    keys = {f"order_{i}": expression for i, (expression, _desc) in enumerate(order)}
    view = lanes(filters, scope, version).annotate(**keys).order_by()
    sql, params = view.values_list("stack_id", "hardware_class_id", *keys).query.sql_with_params()
    # The stack's place on a class is one more than the lanes there ahead of its own in the
    # board's order, counted against its lane (a join, no sort): a window ranking every lane of
    # its classes sorted them all (0.1-0.2 s for a stack on 22 classes at 1,000,000 runs).
    columns = ", ".join(f"k{i}" for i in range(len(order)))
    ahead = " OR ".join(
        "(" + " AND ".join([*(_same(i) for i in range(n)), _before(n, descending)]) + ")"
        for n, (_expression, descending) in enumerate(order)
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH view_lanes (c0, c1, {columns}) AS ({sql}) "  # noqa: S608 (the ORM's SQL)
            f"SELECT m.c1, COUNT(*) FILTER (WHERE {ahead}), COUNT(*) "
            "FROM view_lanes m JOIN view_lanes o ON o.c1 = m.c1 WHERE m.c0 = %s GROUP BY m.c1",
            [*params, stack.id],
        )
        return {class_id: (ahead_n + 1, total) for class_id, ahead_n, total in cursor.fetchall()}


def _same(i: int) -> str:
    """Lane o and lane m equal on order key i (nulls equal)."""
    return f"(o.k{i} = m.k{i} OR (o.k{i} IS NULL AND m.k{i} IS NULL))"


def _before(i: int, descending: bool) -> str:
    """Lane o before lane m on order key i, nulls last."""
    return (
        f"(o.k{i} {'>' if descending else '<'} m.k{i} OR (o.k{i} IS NOT NULL AND m.k{i} IS NULL))"
    )
