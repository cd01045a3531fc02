"""A stack's place on each hardware class's board, as the stack and compare pages show it, and
the class boards it is read from (leaderboard.models.ClassBoard), written with the lanes."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import Q, Sum
from django.db.models.fields.json import KT
from django.utils import timezone

from leaderboard.filters import UNVERSIONED, BoardFilters
from leaderboard.models import ClassBoard
from leaderboard.queries import lane_order, lanes_in_view
from leaderboard.scopes import Scope
from runs.lanes import ClassBoardKey
from runs.models import HardwareClass, Lane, Stack


def lane_places(
    stack: Stack, class_ids: list[int], scale: str, version: str
) -> dict[int, tuple[int, int]]:
    """{class id: (the stack's rank, rows ranked)} on each of these classes' boards, in the
    board's own order (its default sort, the stack's method): what the stack and compare pages
    say beside a lane's figures. One read of the stack's key in the classes' stored boards."""
    boards = ClassBoard.objects.filter(
        hardware_class_id__in=sorted(set(class_ids)), score_scale=scale, benchmark_version=version
    )
    key = f"places__{stack.method}__{ClassBoard.place_key(stack.id)}"
    read = boards.annotate(place=KT(key), placed=Q(places__isnull=False)).values_list(
        "hardware_class_id", "place", "ranked", "placed"
    )
    found = list(read)
    unplaced = [(class_id, scale, version) for class_id, _p, _r, placed in found if not placed]
    if unplaced:  # boards the table was filled with, never placed since: once each
        store_boards(unplaced)
        found = list(read.all())
    return {
        class_id: (int(place), ranked[stack.method])
        for class_id, place, ranked, _placed in found
        if place is not None
    }


def store_boards(keys: Iterable[ClassBoardKey]) -> None:
    """Work these class boards out again from their lanes: their runs and their stacks' order.

    The classes' rows are held first (FOR NO KEY UPDATE, which leaves runs free to point at
    them), so two writers of one class take turns, and the second reads the lanes the first
    committed: each would otherwise order the class without the other's new lane."""
    wanted = sorted(set(keys))
    if not wanted:
        return
    classes = sorted({class_id for class_id, _scale, _version in wanted})
    with transaction.atomic():
        held = HardwareClass.objects.select_for_update(no_key=True).filter(id__in=classes)
        list(held.order_by("id").values_list("id", flat=True))
        runs = _runs(classes)
        orders = _orders(wanted)
        stored = {
            (board.hardware_class_id, board.score_scale, board.benchmark_version): board
            for board in ClassBoard.objects.filter(hardware_class_id__in=classes)
        }
        gone, changed, new, now = [], [], [], timezone.now()
        for key in wanted:
            board = stored.get(key)
            if not runs[key]:
                if board is not None:
                    gone.append(board.id)
                continue
            if board is None:
                class_id, scale, version = key
                board = ClassBoard(
                    hardware_class_id=class_id, score_scale=scale, benchmark_version=version
                )
                new.append(board)
            else:
                changed.append(board)
            board.run_count, board.ranked = runs[key], _ranked(orders[key])
            board.places, board.written_at = _places(orders[key]), now
        ClassBoard.objects.filter(id__in=gone).delete()
        fields = ["run_count", "ranked", "places", "written_at"]
        ClassBoard.objects.bulk_update(changed, fields, batch_size=200)
        ClassBoard.objects.bulk_create(new, batch_size=200)


def boards_changed(sender: Any, boards: set[ClassBoardKey], **kwargs: Any) -> None:
    """runs.signals.lanes_changed's receiver (leaderboard.apps)."""
    store_boards(boards)


def _ranked(order: dict[str, list[int]]) -> dict[str, int]:
    return {method: len(stacks) for method, stacks in order.items()}


def _places(order: dict[str, list[int]]) -> dict[str, dict[str, int]]:
    return {
        method: {ClassBoard.place_key(stack): place for place, stack in enumerate(stacks, 1)}
        for method, stacks in order.items()
    }


def _runs(classes: list[int]) -> Counter[ClassBoardKey]:
    """The published runs on each board of these classes."""
    rows = (
        Lane.objects.filter(hardware_class_id__in=classes, run_count__gt=0)
        .values_list("hardware_class_id", "score_scale", "benchmark_version")
        .annotate(n=Sum("run_count"))
        .order_by()
    )
    return Counter({(class_id, scale, version): n for class_id, scale, version, n in rows})


def _orders(wanted: list[ClassBoardKey]) -> dict[ClassBoardKey, dict[str, list[int]]]:
    """Each board's stacks per method, in the order its board shows them: one query per scale
    and version, every class of it at once."""
    classes: dict[tuple[str, str], list[int]] = defaultdict(list)
    for class_id, scale, version in wanted:
        classes[(scale, version)].append(class_id)
    orders: dict[ClassBoardKey, dict[str, list[int]]] = {key: {} for key in wanted}
    for (scale, version), ids in classes.items():
        filters = BoardFilters(scale=scale, bv=version or UNVERSIONED, scale_named=True)
        view = lanes_in_view(filters, Scope(ids, ""), version).order_by(
            "hardware_class_id", "stack__method", *lane_order(filters)
        )
        for class_id, method, stack_id in view.values_list(
            "hardware_class_id", "stack__method", "stack_id"
        ):
            orders[(class_id, scale, version)].setdefault(method, []).append(stack_id)
    return orders
