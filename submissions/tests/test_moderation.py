from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core import mail

from runs.importers.records import HardwareRecord, ImportedSuite, RunRecord
from runs.models import Stack
from submissions.intake import import_records
from submissions.models import Status, Submission
from submissions.services import moderate_submission

pytestmark = pytest.mark.django_db


def _pending_run() -> Submission:
    record = RunRecord(
        source_format="run-v3",
        started_at=datetime(2026, 11, 2, tzinfo=UTC),
        model_id="gemma3:12b",
        score_scale="v3",
        client_run_id="x",
        comparable=True,
        overall_score=61.0,
        quality_score=60.0,
        speed_score=65.0,
        reliability_score=100.0,
        value_score=20.0,
        hardware=HardwareRecord(gpu="RTX 3090", vram_gb=24),
        suites=[ImportedSuite(suite="toolcall", score=60.0, task_count=15, pass_count=9)],
    )
    run = import_records([record], status=Status.PENDING).created[0]
    return run.submission


def test_approving_publishes_the_run_and_refreshes_its_stack_at_once() -> None:
    submission = _pending_run()

    moderate_submission(
        submission=submission, status=Status.APPROVED, moderator=None, reason="looks right"
    )

    submission.refresh_from_db()
    assert submission.status == Status.APPROVED
    assert submission.decided_at is not None
    assert submission.run.published
    # No wait for a worker: the leaderboard's default view reads the stack's best run.
    assert Stack.objects.get().best_run_id == submission.run_id


def test_rejecting_unpublishes_and_the_refresh_drops_the_run() -> None:
    submission = _pending_run()
    moderate_submission(submission=submission, status=Status.APPROVED, moderator=None)
    from runs.services import refresh_stack_stats

    refresh_stack_stats(stack_ids=[submission.run.stack_id])
    assert Stack.objects.get().best_run_id == submission.run_id

    moderate_submission(
        submission=submission, status=Status.REJECTED, moderator=None, reason="implausible"
    )
    refresh_stack_stats(stack_ids=[submission.run.stack_id])

    submission.run.refresh_from_db()
    assert not submission.run.published
    assert Stack.objects.get().best_run is None


def test_the_decision_email_links_the_run_absolutely(
    alice, settings, django_capture_on_commit_callbacks
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.SITE_URL = "https://bench.example.org"
    submission = _pending_run()
    Submission.objects.filter(pk=submission.pk).update(submitter=alice)
    submission.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        moderate_submission(submission=submission, status=Status.APPROVED, moderator=None)
    [message] = mail.outbox
    assert message.to == ["alice@example.org"]
    assert f"https://bench.example.org/runs/{submission.run_id}/" in message.body
    assert "https://bench.example.org/account/runs/" in message.body
