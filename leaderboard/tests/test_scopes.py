"""What is worked out from the lanes alone (the runs per class, which pick the class that opens
the board and fill the hardware menu; a stack's places) is kept for as long as the lanes'
fingerprint holds: every change to the lanes shows on the next page version."""

from __future__ import annotations

import pytest

from leaderboard import places, scopes
from leaderboard.tests.factories import add_runs, ensure_lanes, record
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
    before = scopes.lanes_fingerprint()

    # A run more on a lane there is: the lane is written again (a new row).
    add_runs(record(model_id="a:8b"), record(model_id="c:8b"))
    assert scopes.lanes_fingerprint() != before
    assert list(scopes.class_runs("v3").items()) == [(ada, 3), (b, 1)]
    assert scopes.default_class("v3").id == ada

    # Lanes gone and none written: the newest lane is the same, the count is not.
    newest = scopes.lanes_fingerprint()
    set_published(other, Status.WITHDRAWN)
    ensure_lanes()
    assert scopes.lanes_fingerprint() != newest
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


def test_a_publish_on_one_class_counts_a_stack_s_place_again_there_alone(monkeypatch) -> None:
    (on_ada,) = add_runs(record(model_id="a:8b", overall=60.0))
    (on_3090,) = add_runs(record(model_id="a:8b", overall=60.0, gpu=RTX_3090, vram_gb=24))
    stack, version = on_ada.stack, on_ada.benchmark_version
    ada, b = on_ada.hardware_class_id, on_3090.hardware_class_id
    assert stack == on_3090.stack
    counted: list[list[int]] = []
    real = places._count_places
    monkeypatch.setattr(places, "_count_places", lambda *a: counted.append(a[1]) or real(*a))
    assert places.lane_places(stack, [ada, b], "v3", version) == {ada: (1, 1), b: (1, 1)}
    assert places.lane_places(stack, [b, ada], "v3", version) == {ada: (1, 1), b: (1, 1)}
    assert counted == [[ada, b]]
    # Two stacks ahead on the 3090 only, written together (the first is not the newest lane).
    first, _second = add_runs(
        record(model_id="b:8b", overall=80.0, gpu=RTX_3090, vram_gb=24),
        record(model_id="c:8b", overall=70.0, gpu=RTX_3090, vram_gb=24),
    )
    assert places.lane_places(stack, [ada, b], "v3", version) == {ada: (1, 1), b: (3, 3)}
    assert counted == [[ada, b], [b]]
    # A deletion alone there (no lane written, the newest the same): counted again there.
    set_published(first, Status.WITHDRAWN)
    ensure_lanes()
    assert places.lane_places(stack, [ada, b], "v3", version) == {ada: (1, 1), b: (2, 2)}
    assert counted == [[ada, b], [b], [b]]
