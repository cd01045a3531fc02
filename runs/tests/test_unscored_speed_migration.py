"""runs 0015 (issue 32): stored runs without the speed suite, which engines before issue 32 sent
with speed_score 0.0 and the site kept, get null ("not scored"); and back. The runs are stored
by the real import service from the records the old parser made of such bundles (speed 0.0)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from leaderboard.tests.factories import record
from runs.importers.records import ImportedSuite
from runs.models import Run
from submissions.intake import import_records

BEFORE = [("runs", "0014_speed_version")]


def _migrate(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def _latest():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _stored(
    *, source_format: str = "bundle-1", speed_score: float | None = 0.0, suites=None, **fields
) -> Run:
    """A run as the site stored it from an old engine's bundle: the record the old parser made
    of it (speed 0.0 without a speed suite), through the real import service."""
    made = record(**fields)
    made.source_format = source_format
    made.speed_score = speed_score
    if suites is not None:
        made.suites = suites
    (run,) = import_records([made]).created
    return run


def _speed_tile(client: Client, run: Run) -> str:
    html = client.get(f"/runs/{run.pk}/").content.decode()
    found = re.search(r'>Speed score</a></span><span class="stat-value">(.*?)</span></div>', html)
    assert found, "the run page has no speed-score tile"
    return found.group(1)


@pytest.mark.django_db(transaction=True)
def test_stored_runs_without_the_speed_suite_have_no_speed_score_and_back() -> None:
    speed = ImportedSuite(suite="speed", score=0.0, task_count=9, pass_count=9)
    sweep = ImportedSuite(suite="speed_sweep", score=None, task_count=8, pass_count=8)
    toolcall = ImportedSuite(suite="toolcall", score=55.0, task_count=10, pass_count=6)
    runs = {
        # Quality suites alone (the factory's tool calls): the case of issue 32.
        "quality only": _stored(),
        # The sweeps alone, on the speed-only scale: measured, not scored.
        "sweeps only": _stored(score_scale="speed", suites=[sweep]),
        # A real speed score of 0 (a very slow stack) stays: it ran the speed suite.
        "scored 0": _stored(model_id="slow:1b", suites=[speed, toolcall]),
        # The v2 formula scored speed on every run: not this migration's.
        "legacy v2": _stored(score_scale="v2", source_format="run-v2"),
        # An imported speed file never had a speed score.
        "imported": _stored(score_scale="speed", source_format="llama-bench", speed_score=None),
    }
    before = {name: Run.objects.get(pk=run.pk).speed_score for name, run in runs.items()}
    assert before == {
        "quality only": 0.0,
        "sweeps only": 0.0,
        "scored 0": 0.0,
        "legacy v2": 0.0,
        "imported": None,
    }

    _migrate(BEFORE)
    _migrate(_latest())
    after = {name: Run.objects.get(pk=run.pk).speed_score for name, run in runs.items()}
    assert after == {**before, "quality only": None, "sweeps only": None}

    # Every page and API that shows a run's speed score says "not scored", never 0.
    client = Client()
    tile = _speed_tile(client, runs["quality only"])
    assert tile.startswith("—") and "not scored" in tile and "0.0" not in tile
    assert _speed_tile(client, runs["scored 0"]) == "0.0"
    api = client.get(f"/api/v1/runs/{runs['quality only'].pk}").json()
    assert api["speed_score"] is None
    stack = runs["quality only"].stack_id
    listed = {
        r["id"]: r["speed_score"] for r in client.get(f"/api/v1/stacks/{stack}").json()["runs"]
    }
    assert listed[runs["quality only"].pk] is None

    _migrate(BEFORE)
    try:
        # Read at the old schema: the column alone (the model's later columns are not there).
        back = {
            name: Run.objects.filter(pk=run.pk).values_list("speed_score", flat=True).get()
            for name, run in runs.items()
        }
    finally:
        _migrate(_latest())  # whatever happened, the rest of this worker's tests need it
    assert back == before
