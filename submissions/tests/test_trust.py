"""Trusting a submitter: the submitters list, the confirmation page, the POST and its guards."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from submissions import services
from submissions.models import Submission, SubmitterProfile
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_pending(alice_key, envelope) -> int:
    return post_json(Client(), "/api/v1/runs", envelope, alice_key).json()["id"]


def test_the_queue_and_the_submitters_list_link_the_trust_page(
    bob_client, alice, alice_pending
) -> None:
    trust_url = f"/moderation/submitters/{alice.pk}/trust/"
    queue = bob_client.get("/moderation/").content.decode()
    assert 'href="/moderation/submitters/"' in queue
    assert f'href="{trust_url}?next=/moderation/">Trust alice…</a>' in queue
    listing = bob_client.get("/moderation/submitters/").content.decode()
    assert (
        f'href="{trust_url}?next=/moderation/submitters/">Trust'
        '<span class="sr-only">&nbsp;alice</span>…</a>'
    ) in listing
    assert '<span class="badge">not trusted</span>' in listing


def test_the_trust_page_shows_the_record_and_asks_before_it_acts(
    bob_client, alice, alice_pending
) -> None:
    page = bob_client.get(f"/moderation/submitters/{alice.pk}/trust/?next=/moderation/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Trust alice?" in html
    assert "1 upload: 0 approved, 1 pending, 0 flagged, 0 rejected, 0 withdrawn." in html
    assert f'href="/runs/{alice_pending}/"' in html
    assert 'name="csrfmiddlewaretoken"' in html and 'method="post"' in html
    assert '<input type="hidden" name="trusted" value="1">' in html
    assert '<input type="hidden" name="next" value="/moderation/">' in html
    assert not SubmitterProfile.objects.filter(user=alice, is_trusted=True).exists()


def test_trusting_and_untrusting_confirm_with_a_message(
    bob_client, bob, alice, alice_key, alice_pending, smoke_run
) -> None:
    url = f"/moderation/submitters/{alice.pk}/trust/"
    response = bob_client.post(url, {"trusted": "1", "next": "/moderation/"}, follow=True)
    assert response.redirect_chain == [("/moderation/", 302)]
    html = response.content.decode()
    assert "alice is now trusted: their next clean uploads are approved without waiting" in html
    assert "Their 1 waiting run still needs a decision." in html
    profile = SubmitterProfile.objects.get(user=alice)
    assert profile.is_trusted and profile.trusted_by == bob and profile.trusted_at
    # The run already waiting still waits; the next clean upload does not.
    assert Submission.objects.get(run_id=alice_pending).status == "pending"
    smoke_run["run_id"] = "after-trust"
    body = post_json(Client(), "/api/v1/runs", smoke_run, alice_key).json()
    assert body["status"] == "approved", body
    assert "Stop trusting alice…" in html

    page = bob_client.get(url).content.decode()
    assert "Stop trusting alice?" in page and "trusted (by bob" in page
    response = bob_client.post(url, {"trusted": "0"}, follow=True)
    assert "alice is no longer trusted: their uploads wait for a moderator again." in (
        response.content.decode()
    )
    profile.refresh_from_db()
    assert not profile.is_trusted and profile.trusted_by is None


def test_only_moderators_reach_trust_and_never_for_themselves(
    alice_client, bob_client, bob, alice, mallory
) -> None:
    url = f"/moderation/submitters/{mallory.pk}/trust/"
    assert alice_client.get(url).status_code == 403
    assert alice_client.post(url, {"trusted": "1"}).status_code == 403
    assert alice_client.get("/moderation/submitters/").status_code == 403
    assert Client().post(url, {"trusted": "1"}).status_code == 302  # to sign-in
    assert bob_client.get(f"/moderation/submitters/{bob.pk}/trust/").status_code == 404
    assert not SubmitterProfile.objects.filter(is_trusted=True).exists()


def test_trusting_needs_a_csrf_token(bob, alice) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(bob)
    response = client.post(f"/moderation/submitters/{alice.pk}/trust/", {"trusted": "1"})
    assert response.status_code == 403
    assert not SubmitterProfile.objects.filter(is_trusted=True).exists()


def test_the_service_checks_the_permission_itself(bob, alice, mallory) -> None:
    with pytest.raises(PermissionDenied):
        services.set_trusted(user=mallory, trusted=True, moderator=alice)
    with pytest.raises(PermissionDenied):
        services.set_trusted(user=bob, trusted=True, moderator=bob)
    assert services.set_trusted(user=mallory, trusted=True, moderator=bob).is_trusted


def test_an_external_next_is_not_followed(bob_client, alice) -> None:
    url = f"/moderation/submitters/{alice.pk}/trust/"
    page = bob_client.get(f"{url}?next=https://evil.example/").content.decode()
    assert '<input type="hidden" name="next" value="">' in page
    assert 'href="https://evil.example/"' not in page
    response = bob_client.post(url, {"trusted": "1", "next": "https://evil.example/"})
    assert response.headers["Location"] == "/moderation/"


def test_the_submitters_list_filters_and_counts(
    bob_client, bob, alice, alice_pending, mallory, mallory_key, smoke_run
) -> None:
    services.set_trusted(user=mallory, trusted=True, moderator=bob)
    smoke_run["run_id"] = "mallory-1"
    post_json(Client(), "/api/v1/runs", smoke_run, mallory_key)
    html = bob_client.get("/moderation/submitters/").content.decode()
    assert "alice" in html and "mallory" in html
    trusted = bob_client.get("/moderation/submitters/?trusted=1").content.decode()
    assert "mallory" in trusted and "alice" not in trusted and "Stop trusting" in trusted
    untrusted = bob_client.get("/moderation/submitters/?trusted=0&q=ali").content.decode()
    assert "alice" in untrusted and "mallory" not in untrusted


def test_the_submitters_list_costs_the_same_queries_however_many_rows(
    bob_client, alice_pending, mallory_key, smoke_run, django_user_model
) -> None:
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert bob_client.get("/moderation/submitters/").status_code == 200
        return len(captured)

    few = queries()
    from submissions.services import create_api_key

    for index in range(3):
        user = django_user_model.objects.create_user(f"user{index}", f"u{index}@example.org")
        key = create_api_key(user=user, name="k", scopes=["submit"])[1]
        smoke_run["run_id"] = f"many-{index}"
        smoke_run["timestamp"] = f"2026-11-{10 + index:02d}T10:00:00+00:00"
        assert post_json(Client(), "/api/v1/runs", smoke_run, key).status_code == 201
    assert queries() == few
