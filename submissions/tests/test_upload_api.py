"""POST /api/v1/runs and the legacy POST /submit with real payloads."""

from __future__ import annotations

import copy
import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.test import Client

from runs.models import Run, TaskResult
from submissions.models import Channel, Status, Submission, UploadAttempt
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db


def test_the_v3_publish_envelope_is_accepted_then_repeats_return_200(
    alice, alice_key, envelope, settings
) -> None:
    settings.SITE_URL = "https://bench.example.org"
    client = Client()
    first = post_json(client, "/api/v1/runs", envelope, alice_key)
    assert first.status_code == 201
    body = first.json()
    run = Run.objects.get()
    assert body == {
        "id": run.id,
        "url": f"https://bench.example.org/runs/{run.id}/",  # absolute: the CLI prints it
        "client_run_id": "20261130-050515-example-model-8b-local-fake",
        "status": "pending",
        "published": False,
        "flag_reasons": [],
        "duplicate": False,
        "attempts": 1,
    }
    assert run.submission.channel == Channel.API_KEY
    assert run.submission.submitter == alice
    assert run.source_format == "envelope-v3"
    assert (run.overall_score, run.profile, run.comparable) == (32.09, "full", True)
    assert not run.published  # a new submitter's run waits for a moderator

    again = post_json(client, "/api/v1/runs", envelope, alice_key)
    assert again.status_code == 200
    # The same run again stores nothing new, and the answer says so (issue 32).
    assert again.json() == {**body, "duplicate": True}
    assert Run.objects.count() == 1 and UploadAttempt.objects.count() == 1


def test_identical_content_under_a_new_id_is_a_duplicate(alice_key, envelope) -> None:
    client = Client()
    first = post_json(client, "/api/v1/runs", envelope, alice_key).json()
    renamed = copy.deepcopy(envelope)
    renamed["run"]["source_run_id"] = "a-brand-new-id"
    second = post_json(client, "/api/v1/runs", renamed, alice_key)
    assert second.status_code == 200
    assert second.json()["id"] == first["id"]
    assert second.json()["duplicate"] is True
    assert Run.objects.count() == 1


def test_another_account_cannot_claim_the_same_run(alice_key, mallory_key, envelope) -> None:
    assert post_json(Client(), "/api/v1/runs", envelope, alice_key).status_code == 201
    response = post_json(Client(), "/api/v1/runs", envelope, mallory_key)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"
    assert Submission.objects.get().submitter.username == "alice"


def test_a_client_run_id_reused_for_different_content_is_a_conflict(
    alice_key, envelope, smoke_run
) -> None:
    # Both fixtures carry the same folder name as their run id.
    assert post_json(Client(), "/api/v1/runs", envelope, alice_key).status_code == 201
    response = post_json(Client(), "/api/v1/runs", smoke_run, alice_key)
    assert response.status_code == 409
    assert "already used for a different run" in response.json()["error"]["message"]
    assert Run.objects.count() == 1


def test_a_v3_run_json_and_an_upgraded_v2_run_go_through_the_same_chain(
    alice_key, smoke_run, v2_run
) -> None:
    client = Client()
    assert post_json(client, "/api/v1/runs", smoke_run, alice_key).status_code == 201
    assert post_json(client, "/api/v1/runs", v2_run, alice_key).status_code == 201
    legacy = Run.objects.get(score_scale="v2")
    assert legacy.source_format == "run-v2"
    assert legacy.score_schema_version == ""
    assert TaskResult.objects.filter(suite_result__run=legacy).count() == 89


def test_the_legacy_anonymous_submit_lands_as_pending(v2_run) -> None:
    response = post_json(
        Client(),
        "/submit",
        v2_run,
        REMOTE_ADDR="203.0.113.7",
        HTTP_USER_AGENT="benchloop-cli/0.2.3",
    )
    assert response.status_code == 200
    run = Run.objects.get()
    assert response.json() == {"status": "pending", "id": run.id}
    submission = run.submission
    assert submission.channel == Channel.LEGACY_ANONYMOUS
    assert submission.status == Status.PENDING and submission.submitter is None
    assert not run.published
    # The address is kept only as a keyed hash, and the payload without machine identifiers.
    assert "203.0.113.7" not in json.dumps(
        [submission.uploader_key, run.raw_payload, submission.flag_reasons]
    )
    assert len(submission.uploader_key) == 64
    assert "machine_id" not in run.raw_payload["machine"]
    assert "endpoint" not in run.raw_payload["machine"]
    # A repeat of the same body is the same run.
    again = post_json(Client(), "/submit", v2_run, REMOTE_ADDR="203.0.113.7")
    assert again.status_code == 200 and again.json()["id"] == run.id
    assert Run.objects.count() == 1


def test_legacy_submissions_are_never_auto_approved_even_when_consistent(v2_run) -> None:
    post_json(Client(), "/submit", v2_run)
    assert Submission.objects.get().status in (Status.PENDING, Status.FLAGGED)


def test_legacy_submit_is_rate_limited_per_address(
    v2_run, smoke_run, throttle_rates, unique_address
) -> None:
    throttle_rates["legacy_submit"] = "1/hour"
    assert post_json(Client(), "/submit", v2_run, REMOTE_ADDR=unique_address).status_code == 200
    limited = post_json(Client(), "/submit", smoke_run, REMOTE_ADDR=unique_address)
    assert limited.status_code == 429
    assert int(limited.headers["Retry-After"]) > 0
    assert Run.objects.count() == 1
    other_address = unique_address.rsplit(".", 1)[0] + ".255"
    other = post_json(Client(), "/submit", smoke_run, REMOTE_ADDR=other_address)
    assert other.status_code == 200


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_identical_uploads_create_exactly_one_run(
    live_server, alice_key, envelope
) -> None:
    body = json.dumps(envelope)

    def upload(_: int) -> int:
        with httpx.Client(base_url=live_server.url, timeout=60) as http:
            return http.post(
                "/api/v1/runs",
                content=body,
                headers={
                    "Authorization": f"Bearer {alice_key}",
                    "Content-Type": "application/json",
                },
            ).status_code

    with ThreadPoolExecutor(max_workers=50) as pool:
        statuses = list(pool.map(upload, range(50)))

    assert statuses.count(201) == 1
    assert statuses.count(200) == 49
    assert Run.objects.count() == 1
    assert Submission.objects.count() == 1
    assert TaskResult.objects.count() == 93


def test_the_owner_can_withdraw_and_delete_their_run(alice_client, alice_key, envelope) -> None:
    run_id = post_json(Client(), "/api/v1/runs", envelope, alice_key).json()["id"]
    assert alice_client.post(f"/account/runs/{run_id}/withdraw/").status_code == 302
    assert Submission.objects.get().status == Status.WITHDRAWN

    listing = alice_client.get("/account/runs/").content.decode()
    assert "withdrawn" in listing

    response = Client().delete(
        f"/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {alice_key}"}
    )
    assert response.status_code == 204
    assert Run.objects.count() == 0 and Submission.objects.count() == 0


def test_nobody_else_can_withdraw_delete_or_read_a_private_run(
    alice_key, mallory, mallory_key, envelope
) -> None:
    run_id = post_json(Client(), "/api/v1/runs", envelope, alice_key).json()["id"]
    other = Client()
    other.force_login(mallory)
    assert other.post(f"/account/runs/{run_id}/withdraw/").status_code == 404
    assert other.post(f"/account/runs/{run_id}/delete/").status_code == 404
    assert str(run_id) not in other.get("/account/runs/").content.decode()
    deleted = Client().delete(
        f"/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {mallory_key}"}
    )
    assert deleted.status_code == 404
    # Pending runs are not public: the read API does not know them.
    assert Client().get(f"/api/v1/runs/{run_id}").status_code == 404
    assert Submission.objects.get().status == Status.PENDING
