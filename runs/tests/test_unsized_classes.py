"""Issue 32: a machine whose file recorded no memory size ("Apple M1 Pro") is no peer class of
the sized ones ("Apple M1 Pro 32 GB"): it joins the one sized class of its chip where there is
exactly one, and is otherwise labelled "memory not reported". Migration 0012 does the same for
the classes already stored."""

from __future__ import annotations

import pytest

from leaderboard.tests.factories import add_runs, record
from runs.identities import merge_unsized_classes
from runs.lanes import LaneModels, refresh_lanes
from runs.models import Hardware, HardwareClass, Lane, Run

pytestmark = pytest.mark.django_db
M1 = {"gpu": "Apple M1 Pro", "cpu": "Apple M1 Pro", "os_name": "Darwin", "vram_gb": None}


def _apple(ram_gb: float | None, **fields) -> Run:
    (run,) = add_runs(record(**M1, ram_gb=ram_gb, **fields))
    return Run.objects.select_related("hardware_class").get(pk=run.pk)


def test_a_run_without_memory_joins_the_one_sized_class() -> None:
    sized = _apple(32)
    assert sized.hardware_class.label == "Apple M1 Pro 32 GB"
    unsized = _apple(None, model_id="llama3.1:8b")
    assert unsized.hardware_class_id == sized.hardware_class_id
    assert HardwareClass.objects.filter(chip="Apple M1 Pro").count() == 1


def test_without_one_sized_class_it_says_memory_not_reported() -> None:
    alone = _apple(None)
    assert alone.hardware_class.label == "Apple M1 Pro · memory not reported"
    # Two sizes: which one it was is unknown, so it stays apart and says so.
    _apple(16, model_id="llama3.1:8b")
    _apple(32, model_id="gemma3:4b")
    again = _apple(None, model_id="phi4:14b")
    assert again.hardware_class_id == alone.hardware_class_id
    labels = set(HardwareClass.objects.values_list("label", flat=True))
    assert labels == {
        "Apple M1 Pro · memory not reported",
        "Apple M1 Pro 16 GB",
        "Apple M1 Pro 32 GB",
    }


def test_the_migration_merges_a_stored_unsized_class_into_its_sized_peer() -> None:
    sized = _apple(32)
    # A class stored before issue 32: its own peer, labelled without any memory.
    old = HardwareClass.objects.create(
        key="apple|apple-m1-pro|0", slug="apple-m1-pro", kind="apple", label="Apple M1 Pro",
        vendor="apple", chip="Apple M1 Pro", count=1, memory_gb=None,
    )  # fmt: skip
    stray = _apple(None, model_id="llama3.1:8b")
    Run.objects.filter(pk=stray.pk).update(hardware_class=old)
    Hardware.objects.filter(pk=stray.hardware_id).update(hardware_class=old)
    lanes = LaneModels(run=Run, lane=Lane, hardware_class=HardwareClass)
    refresh_lanes([stray.stack_id], models=lanes)
    assert Lane.objects.filter(hardware_class=old).exists()

    models = type("M", (), {"hardware_class": HardwareClass, "hardware": Hardware})
    models.run, models.lane = Run, Lane
    merged = merge_unsized_classes(models, lambda ids: refresh_lanes(ids, models=lanes))
    assert merged == 1
    assert not HardwareClass.objects.filter(pk=old.pk).exists()
    stray.refresh_from_db()
    assert stray.hardware_class_id == sized.hardware_class_id
    assert Hardware.objects.get(pk=stray.hardware_id).hardware_class_id == sized.hardware_class_id
    assert Lane.objects.filter(
        stack_id=stray.stack_id, hardware_class=sized.hardware_class
    ).exists()


def test_the_migration_relabels_an_unsized_class_without_one_peer() -> None:
    lone = HardwareClass.objects.create(
        key="gpu|rtx-3060|1|0", slug="rtx-3060", kind="gpu", label="RTX 3060",
        vendor="nvidia", chip="RTX 3060", count=1, memory_gb=None,
    )  # fmt: skip
    models = type("M", (), {"hardware_class": HardwareClass, "hardware": Hardware})
    models.run, models.lane = Run, Lane
    assert merge_unsized_classes(models, lambda ids: None) == 0
    lone.refresh_from_db()
    assert lone.label == "RTX 3060 · memory not reported"
