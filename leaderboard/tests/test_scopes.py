"""What is worked out from the lanes alone: the runs per class (which pick the class that opens
the board and fill the hardware menu), a stack's places and the boards' fingerprint (what the
estimates' calibration is kept by), all read from the class boards that a refresh writes with
the lanes it changed. Every change to the lanes shows on the next page version."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as django_apps

from leaderboard import places, scopes
from leaderboard.models import ClassBoard
from leaderboard.tests.factories import add_runs, ensure_lanes, record
from runs.methods import DEFAULT_METHOD
from runs.models import Stack
from runs.signals import lanes_changed
from submissions.intake import set_published
from submissions.models import Status

pytestmark = pytest.mark.django_db

RTX_3090 = "NVIDIA GeForce RTX 3090"


def test_the_runs_per_class_follow_every_change_to_the_lanes() -> None:
    # The 3090's stack first, so that its lanes are not the newest.
    (other,) = add_runs(record(model_id="b:8b", gpu=RTX_3090, vram_gb=24))
    (first,) = add_runs(record(model_id="a:8b"))
    ada, b = first.hardware_class_id, other.hardware_class_id
    assert scopes.class_runs("v3") == {ada: 1, b: 1}
    assert list(scopes.class_runs("v3")) == sorted([ada, b])  # equals: the lower id first
    before = scopes.boards_fingerprint()

    # A run more on a lane there is: the lane and its class's board are written again.
    add_runs(record(model_id="a:8b"), record(model_id="c:8b"))
    assert scopes.boards_fingerprint() != before
    assert list(scopes.class_runs("v3").items()) == [(ada, 3), (b, 1)]
    assert scopes.default_class("v3").id == ada

    # The 3090's only lane gone and none written: its board is deleted.
    newest = scopes.boards_fingerprint()
    set_published(other, Status.WITHDRAWN)
    ensure_lanes()
    assert scopes.boards_fingerprint() != newest
    assert scopes.class_runs("v3") == {ada: 3}
    assert scopes.class_runs() == {ada: 3}


def test_a_stack_s_places_are_kept_while_the_lanes_hold_and_follow_their_changes() -> None:
    (run,) = add_runs(record(model_id="a:8b", overall=60.0))
    stack, ada = run.stack, run.hardware_class_id
    assert places.lane_places(stack, [ada], "v3", run.benchmark_version) == {ada: (1, 1)}
    add_runs(record(model_id="b:8b", overall=80.0))  # ahead of it
    assert places.lane_places(stack, [ada], "v3", run.benchmark_version) == {ada: (2, 2)}
    add_runs(record(model_id="c:8b", overall=40.0))
    assert places.lane_places(stack, [ada], "v3", run.benchmark_version) == {ada: (2, 3)}


def test_a_refresh_writes_the_boards_of_the_lanes_it_changed_and_no_other() -> None:
    (on_ada,) = add_runs(record(model_id="a:8b", overall=60.0))
    (on_3090,) = add_runs(record(model_id="a:8b", overall=60.0, gpu=RTX_3090, vram_gb=24))
    stack, version = on_ada.stack, on_ada.benchmark_version
    ada, b = on_ada.hardware_class_id, on_3090.hardware_class_id
    assert stack == on_3090.stack
    assert places.lane_places(stack, [ada, b], "v3", version) == {ada: (1, 1), b: (1, 1)}
    written: list[set] = []

    def seen(sender, boards, **kwargs) -> None:
        written.append(set(boards))

    lanes_changed.connect(seen, weak=False)
    try:
        # Two stacks ahead on the 3090 only, written together (the first is not the newest lane).
        first, _second = add_runs(
            record(model_id="b:8b", overall=80.0, gpu=RTX_3090, vram_gb=24),
            record(model_id="c:8b", overall=70.0, gpu=RTX_3090, vram_gb=24),
        )
        assert places.lane_places(stack, [ada, b], "v3", version) == {ada: (1, 1), b: (3, 3)}
        # A deletion alone there (no lane written, the newest the same).
        set_published(first, Status.WITHDRAWN)
        ensure_lanes()
        assert places.lane_places(stack, [ada, b], "v3", version) == {ada: (1, 1), b: (2, 2)}
        ensure_lanes()  # nothing changed: no board written
    finally:
        lanes_changed.disconnect(seen)
    assert written == [{(b, "v3", version)}, {(b, "v3", version)}]
    assert scopes.class_runs("v3") == {b: 2, ada: 1}


def test_a_stack_s_places_are_one_read_of_the_stored_boards(django_assert_num_queries) -> None:
    (run,) = add_runs(record(model_id="a:8b", overall=60.0))
    add_runs(record(model_id="b:8b", overall=80.0), record(model_id="c:8b", overall=40.0))
    ada, version = run.hardware_class_id, run.benchmark_version
    with django_assert_num_queries(1):
        assert places.lane_places(run.stack, [ada], "v3", version) == {ada: (2, 3)}


def test_boards_the_migration_left_unordered_are_ordered_on_first_read() -> None:
    (run,) = add_runs(record(model_id="a:8b", overall=60.0))
    add_runs(record(model_id="b:8b", overall=80.0))
    ada, version = run.hardware_class_id, run.benchmark_version
    ClassBoard.objects.update(places=None)  # as leaderboard 0001 fills the table: counts alone
    assert places.lane_places(run.stack, [ada], "v3", version) == {ada: (2, 2)}
    ahead = Stack.objects.get(model_id="b:8b").id
    assert ClassBoard.objects.get(hardware_class_id=ada).places == {
        DEFAULT_METHOD: {f"s{ahead}": 1, f"s{run.stack_id}": 2}
    }


def test_the_migration_fills_the_counts_the_writer_writes() -> None:
    add_runs(
        record(model_id="a:8b", overall=60.0),
        record(model_id="b:8b", overall=80.0, gpu=RTX_3090, vram_gb=24),
        record(model_id="c:8b", score_scale="speed"),
        record(model_id="c:8b", score_scale="speed", method="llama-bench"),
    )
    fields = ("hardware_class_id", "score_scale", "benchmark_version", "run_count", "ranked")
    written = sorted(ClassBoard.objects.values_list(*fields))
    # Two classes on v3, and on speed only one version per method (runs.methods).
    assert len(written) == 4 and {"llama-bench"} in [set(row[-1]) for row in written]
    ClassBoard.objects.all().delete()
    migration = importlib.import_module("leaderboard.migrations.0001_class_boards")
    migration.fill(django_apps, None)
    assert sorted(ClassBoard.objects.values_list(*fields)) == written
    assert set(ClassBoard.objects.values_list("places", flat=True)) == {None}
