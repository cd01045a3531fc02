from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from runs.models import Run, Stack, SuiteResult
from submissions.models import Submission

pytestmark = pytest.mark.django_db


def test_seed_demo_fills_an_empty_database_once(settings, fixtures_dir) -> None:
    settings.BENCHLOOP_FIXTURES_DIR = fixtures_dir
    out = io.StringIO()
    call_command("seed_demo", stdout=out)

    assert Run.objects.filter(is_demo=True).count() > 100
    # The real fixture files come along, unmarked: they are not synthetic.
    assert Run.objects.filter(source_format="leaderboard-v1", is_demo=False).count() == 17
    assert Run.objects.filter(source_format="leaderboard-v2").count() == 0  # unlicensed file
    real = Run.objects.filter(is_demo=False).count()
    # The next to last line says what was seeded; the last, what the board now shows.
    assert out.getvalue().splitlines()[-2] == (
        f"seeded {real} real and {Run.objects.count() - real} synthetic runs"
    )
    assert Stack.objects.filter(best_run__isnull=False).count() > 50
    before = Run.objects.count()

    call_command("seed_demo", stdout=out)
    assert Run.objects.count() == before
    assert "already present" in out.getvalue()


def test_seed_demo_says_what_it_seeded_without_the_fixture_folder(settings, tmp_path) -> None:
    settings.BENCHLOOP_FIXTURES_DIR = tmp_path / "not-here"
    out = io.StringIO()
    call_command("seed_demo", stdout=out)

    assert Run.objects.filter(is_demo=False).count() == 0
    synthetic = Run.objects.filter(is_demo=True).count()
    assert synthetic > 100
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        f"no fixture folder at {tmp_path / 'not-here'}: no real runs imported. Set "
        "BENCHLOOP_FIXTURES_DIR to a copy of the earlier product's data files "
        "(shared/fixtures/benchloop) to add its real runs."
    )
    assert lines[-2] == f"seeded 0 real and {synthetic} synthetic runs (synthetic only)"


def test_seed_demo_runs_builds_a_bulk_dataset() -> None:
    out = io.StringIO()
    call_command("seed_demo", "--runs", "1500", stdout=out)

    assert Run.objects.count() == 1500
    # About one upload in twenty is turned down: an attempt, not a published run.
    approved = Submission.objects.filter(status="approved").count()
    assert approved + Submission.objects.filter(status="rejected").count() == 1500
    assert 1350 < approved < 1500
    assert Run.objects.filter(published=True).count() == approved
    assert SuiteResult.objects.count() == 1500 * 6
    run = Run.objects.filter(published=True, hardware__isnull=False).order_by("?").first()
    assert run.published and run.is_demo and run.comparable
    assert 0 < run.decode_tps_median < 2000
    assert run.decode_tps_p5 <= run.decode_tps_median <= run.decode_tps_p95
    expected = round(
        0.70 * run.quality_score + 0.25 * run.speed_score + 0.05 * run.reliability_score, 2
    )
    assert run.overall_score == pytest.approx(expected, abs=0.011)
    published_stacks = Stack.objects.filter(runs__published=True).distinct().count()
    assert Stack.objects.filter(best_run__isnull=False).count() == published_stacks
    assert "runs/s" in out.getvalue()
