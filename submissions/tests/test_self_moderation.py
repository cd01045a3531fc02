"""Nobody moderates their own runs: moderators and superusers alike."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from submissions.models import ModerationDecision, Status, Submission
from submissions.services import SelfModerationError, create_api_key, moderate_submission
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db


def _upload(user: User, payload: dict) -> Submission:
    key = create_api_key(user=user, name="own", scopes=["submit"])[1]
    response = post_json(Client(), "/api/v1/runs", payload, key)
    assert response.status_code == 201, response.content
    return Submission.objects.get(run_id=response.json()["id"])


def test_a_moderator_cannot_approve_their_own_upload_in_the_queue(
    bob, bob_client, smoke_run
) -> None:
    own = _upload(bob, smoke_run)
    response = bob_client.post(
        "/moderation/decide/", {"submissions": [own.pk], "status": "approved"}, follow=True
    )
    own.refresh_from_db()
    assert own.status == Status.PENDING and not own.run.published
    assert "your own runs" in response.content.decode()
    assert not ModerationDecision.objects.filter(moderator=bob).exists()


def test_the_queue_marks_ones_own_run_and_offers_no_action(
    bob, bob_client, smoke_run, alice_key, envelope
) -> None:
    own = _upload(bob, smoke_run)
    other = post_json(Client(), "/api/v1/runs", envelope, alice_key).json()["id"]
    html = bob_client.get("/moderation/").content.decode()
    assert f'value="{own.pk}"' not in html  # no checkbox for bob's own run
    assert "your run" in html
    assert f'value="{Submission.objects.get(run_id=other).pk}"' in html


def test_with_only_own_runs_waiting_the_queue_shows_no_decision_form(
    bob, bob_client, smoke_run
) -> None:
    _upload(bob, smoke_run)
    html = bob_client.get("/moderation/").content.decode()
    assert "your run" in html and "Decision for the selected runs" not in html


def test_the_service_refuses_self_moderation_superusers_included(smoke_run) -> None:
    root = User.objects.create_superuser("root", "root@example.org", "pw-pw-pw-1")
    own = _upload(root, smoke_run)
    for status in (Status.APPROVED, Status.REJECTED, Status.FLAGGED):
        with pytest.raises(SelfModerationError):
            moderate_submission(submission=own, status=status, moderator=root, reason="mine")
    own.refresh_from_db()
    assert own.status == Status.PENDING


def test_an_admin_action_on_ones_own_run_decides_nothing(smoke_run) -> None:
    root = User.objects.create_superuser("root", "root@example.org", "pw-pw-pw-1")
    own = _upload(root, smoke_run)
    client = Client()
    client.force_login(root)
    response = client.post(
        "/admin/submissions/submission/",
        {"action": "approve", "_selected_action": [own.pk]},
        follow=True,
    )
    assert response.status_code == 200
    own.refresh_from_db()
    assert own.status == Status.PENDING
    assert "is yours: not decided" in response.content.decode()


def test_withdrawing_ones_own_run_is_still_allowed(alice, alice_client, smoke_run) -> None:
    own = _upload(alice, smoke_run)
    assert alice_client.post(f"/account/runs/{own.run_id}/withdraw/").status_code == 302
    own.refresh_from_db()
    assert own.status == Status.WITHDRAWN
