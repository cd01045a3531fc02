"""The moderator's queue: access, evidence, bulk decisions, audit log, trust, reports, email."""

from __future__ import annotations

import pytest
from django.core import mail
from django.test import Client

from runs.models import Run
from submissions.models import ModerationDecision, Status, Submission, SubmitterProfile
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db


@pytest.fixture
def pending_run(alice_key, envelope) -> int:
    return post_json(Client(), "/api/v1/runs", envelope, alice_key).json()["id"]


def test_only_moderators_see_the_queue(alice_client, pending_run) -> None:
    assert alice_client.get("/moderation/").status_code == 403
    assert Client().get("/moderation/").status_code == 302  # to sign-in
    assert (
        alice_client.post(
            "/moderation/decide/", {"submissions": [1], "status": "approved"}
        ).status_code
        == 403
    )


def test_the_queue_shows_waiting_runs_with_their_evidence(bob_client, pending_run) -> None:
    html = bob_client.get("/moderation/").content.decode()
    assert "example-model:8b" in html
    assert "alice" in html and "API key upload" in html
    assert "pending" in html


def test_bulk_approval_publishes_logs_and_emails(
    bob_client, bob, pending_run, smoke_run, alice_key, django_capture_on_commit_callbacks
) -> None:
    smoke_run["run_id"] = "smoke-1"
    second = post_json(Client(), "/api/v1/runs", smoke_run, alice_key).json()["id"]
    ids = list(Submission.objects.values_list("pk", flat=True))
    with django_capture_on_commit_callbacks(execute=True):
        response = bob_client.post(
            "/moderation/decide/",
            {
                "submissions": ids,
                "status": "approved",
                "reason": "matches peers",
                "next": "/moderation/?status=waiting",
            },
        )
    assert response.status_code == 302
    assert response.headers["Location"] == "/moderation/?status=waiting"
    assert set(Run.objects.filter(published=True).values_list("id", flat=True)) == {
        pending_run,
        second,
    }
    decisions = ModerationDecision.objects.filter(moderator=bob)
    assert decisions.count() == 2
    assert {(d.from_status, d.to_status, d.reason) for d in decisions} == {
        ("pending", "approved", "matches peers")
    }
    assert len(mail.outbox) == 2
    assert mail.outbox[0].to == ["alice@example.org"]
    assert "approved" in mail.outbox[0].subject
    log = bob_client.get("/moderation/log/").content.decode()
    assert "pending → approved" in log and "bob" in log


def test_a_rejection_needs_a_reason(bob_client, pending_run) -> None:
    ids = list(Submission.objects.values_list("pk", flat=True))
    bob_client.post("/moderation/decide/", {"submissions": ids, "status": "rejected"})
    assert Submission.objects.get().status == Status.PENDING
    bob_client.post(
        "/moderation/decide/",
        {"submissions": ids, "status": "rejected", "reason": "impossible TTFT"},
    )
    submission = Submission.objects.get()
    assert submission.status == Status.REJECTED
    assert submission.moderation_note == "impossible TTFT"


def test_an_external_next_url_is_not_followed(bob_client, pending_run) -> None:
    ids = list(Submission.objects.values_list("pk", flat=True))
    response = bob_client.post(
        "/moderation/decide/",
        {"submissions": ids, "status": "approved", "next": "https://evil.example/"},
    )
    assert response.headers["Location"] == "/moderation/"


def test_a_moderator_can_mark_a_submitter_trusted(bob_client, alice, alice_key, smoke_run) -> None:
    response = bob_client.post(f"/moderation/submitters/{alice.pk}/trust/", {"trusted": "1"})
    assert response.status_code == 302
    assert SubmitterProfile.objects.get(user=alice).is_trusted
    body = post_json(Client(), "/api/v1/runs", smoke_run, alice_key).json()
    assert body["status"] == "approved"


def test_moderators_cannot_trust_themselves(bob_client, bob) -> None:
    assert (
        bob_client.post(f"/moderation/submitters/{bob.pk}/trust/", {"trusted": "1"}).status_code
        == 404
    )


def test_a_report_reaches_the_queue_and_the_run_stays_public(
    bob_client, pending_run, mallory
) -> None:
    ids = list(Submission.objects.values_list("pk", flat=True))
    bob_client.post("/moderation/decide/", {"submissions": ids, "status": "approved"})
    reporter = Client()
    reporter.force_login(mallory)
    assert reporter.get(f"/runs/{pending_run}/report/").status_code == 200
    response = reporter.post(f"/runs/{pending_run}/report/", {"reason": "TTFT looks faked"})
    assert response.status_code == 302
    submission = Submission.objects.get()
    # One ordinary account's report does not hide a run (see test_reports.py).
    assert submission.status == Status.APPROVED
    assert submission.run.published
    assert "TTFT looks faked" in bob_client.get("/moderation/").content.decode()


def test_reporting_needs_sign_in_and_a_public_run(pending_run, mallory) -> None:
    assert Client().post(f"/runs/{pending_run}/report/", {"reason": "x"}).status_code == 302
    reporter = Client()
    reporter.force_login(mallory)
    # Still pending: not public, so it cannot be reported (or discovered) by others.
    assert reporter.get(f"/runs/{pending_run}/report/").status_code == 404
