"""Issue 32: a run without the speed suite has no speed score (null, shown "—"), and a
speed-only run keeps the speed score its receipts show. Real bundles from the real engine."""

from __future__ import annotations

import copy
import re

import jsonschema
import pytest
from django.test import Client

from runs.importers import parse_run_payload
from runs.limits import upload_schema
from runs.models import Run
from submissions.intake import import_records
from worker.engine.bundle import upload_view
from worker.engine.orchestrator import run_benchmark
from worker.engine.plan import RunConfig

pytestmark = pytest.mark.llm


@pytest.fixture(scope="module")
def speed_bundle(llm_url, tmp_path_factory) -> dict:
    """The speed suite alone: its cheapest cell (16 tokens out, where the others decode 256),
    one trial (a machine shared by many tests). Its trial still measures a decode rate, so the
    suite has a speed score."""
    home = tmp_path_factory.mktemp("speed-only-home")
    config = RunConfig(url=llm_url, suites=["speed"], tasks=["speed-p512-n16"], trials=1, home=home)
    outcome = run_benchmark(config)
    assert outcome.status == "complete"
    return upload_view(outcome.bundle)


def _speed_tile(client: Client, run: Run) -> str:
    html = client.get(f"/runs/{run.pk}/").content.decode()
    found = re.search(r">Speed score</a></span><span class=\"stat-value\">([^<]*)<", html)
    assert found, "the run page has no speed-score tile"
    return found.group(1)


@pytest.mark.django_db
@pytest.mark.parametrize("written", [None, 0.0], ids=["this engine", "an older engine's 0.0"])
def test_a_run_of_the_sweeps_alone_stores_no_speed_score(sweep_bundle, written, client) -> None:
    assert sweep_bundle["speed_score"] is None  # the engine writes null, never 0.0
    sent = copy.deepcopy(sweep_bundle)
    sent["speed_score"] = written
    jsonschema.validate(sent, upload_schema())
    (run,) = import_records([parse_run_payload(sent)]).created
    run.refresh_from_db()
    assert run.speed_score is None
    assert _speed_tile(client, run) == "—"


@pytest.mark.django_db
def test_a_speed_only_run_shows_the_speed_score_of_its_receipts(speed_bundle, client) -> None:
    score = speed_bundle["suites"]["speed"]["score"]
    assert speed_bundle["speed_score"] == pytest.approx(score, abs=0.01) and score > 0
    (run,) = import_records([parse_run_payload(copy.deepcopy(speed_bundle))]).created
    run.refresh_from_db()
    assert run.speed_score == speed_bundle["speed_score"]
    assert (run.overall_score, run.quality_score) == (None, None)
    assert _speed_tile(client, run) == f"{speed_bundle['speed_score']:,.1f}"
