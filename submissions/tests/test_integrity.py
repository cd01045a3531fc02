"""Upload-time integrity checks: peers, consistency, trust and best-of-N counts."""

from __future__ import annotations

import copy

import pytest
from django.test import Client

from runs.models import Run
from submissions.models import ModerationDecision, Status, SubmitterProfile
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db


def _variant(run: dict, index: int, decode: float) -> dict:
    """The smoke fixture as a distinct run with the given decode speed on every trial."""
    data = copy.deepcopy(run)
    data["run_id"] = f"peer-{index}"
    data["timestamp"] = f"2026-11-{10 + index:02d}T10:00:00+00:00"
    for task in data["suites"]["speed"]["tasks"]:
        for trial in task["metadata"]["trials"]:
            trial["speed_metrics"]["generation_tok_per_sec"] = decode + index * 0.3
    return data


@pytest.fixture
def approved_peers(mallory, mallory_key, smoke_run) -> None:
    SubmitterProfile.objects.create(user=mallory, is_trusted=True)
    for index, decode in enumerate([58.0, 61.0, 56.5, 60.0, 59.0]):
        response = post_json(
            Client(), "/api/v1/runs", _variant(smoke_run, index, decode), mallory_key
        )
        assert response.json()["status"] == "approved"


def test_a_planted_outlier_is_flagged_with_a_readable_reason(
    approved_peers, alice_key, smoke_run
) -> None:
    response = post_json(Client(), "/api/v1/runs", _variant(smoke_run, 9, 600.0), alice_key)

    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "flagged"
    [reason] = [r for r in body["flag_reasons"] if r.startswith("decode speed")]
    assert "is 10.0× the median of 5 approved peers on RTX 4090" in reason
    run = Run.objects.get(pk=body["id"])
    assert not run.published
    decision = ModerationDecision.objects.get(submission=run.submission)
    assert (decision.to_status, decision.automatic) == (Status.FLAGGED, True)


def test_a_consistent_upload_from_a_trusted_submitter_is_auto_approved(
    approved_peers, alice, alice_key, smoke_run
) -> None:
    SubmitterProfile.objects.create(user=alice, is_trusted=True)
    response = post_json(Client(), "/api/v1/runs", _variant(smoke_run, 7, 59.5), alice_key)
    body = response.json()
    assert (body["status"], body["flag_reasons"]) == ("approved", [])
    assert Run.objects.get(pk=body["id"]).published
    assert Client().get(f"/api/v1/runs/{body['id']}").status_code == 200


def test_a_trusted_submitters_outlier_is_still_flagged(
    approved_peers, alice, alice_key, smoke_run
) -> None:
    SubmitterProfile.objects.create(user=alice, is_trusted=True)
    body = post_json(Client(), "/api/v1/runs", _variant(smoke_run, 8, 300.0), alice_key).json()
    assert body["status"] == "flagged"
    assert any("5.0× the median" in reason for reason in body["flag_reasons"])


def test_a_run_slower_than_its_peers_is_not_flagged(
    approved_peers, alice, alice_key, smoke_run
) -> None:
    # A throttled card or weights spilled to system memory: slow is not fraud.
    SubmitterProfile.objects.create(user=alice, is_trusted=True)
    body = post_json(Client(), "/api/v1/runs", _variant(smoke_run, 9, 5.0), alice_key).json()
    assert (body["status"], body["flag_reasons"]) == ("approved", [])


def test_scores_that_do_not_follow_from_the_suites_are_flagged(alice_key, smoke_run) -> None:
    data = copy.deepcopy(smoke_run)
    data["overall_score"] = 95.0  # quality 0, speed 74.48, reliability 100 give 23.62
    body = post_json(Client(), "/api/v1/runs", data, alice_key).json()
    assert body["status"] == "flagged"
    assert body["flag_reasons"] == [
        "overall score 95 does not follow from quality 0, speed 74.48 and reliability 100 "
        "(expected 23.62)"
    ]


def test_a_physically_impossible_speed_is_flagged(alice_key, smoke_run) -> None:
    data = _variant(smoke_run, 1, 9000.0)
    body = post_json(Client(), "/api/v1/runs", data, alice_key).json()
    assert body["status"] == "flagged"
    assert any("exceeds the physical sanity bound" in r for r in body["flag_reasons"])


def test_attempt_counts_are_returned_and_public(
    approved_peers, alice, alice_key, smoke_run, bob_client
) -> None:
    SubmitterProfile.objects.create(user=alice, is_trusted=True)
    bodies = [
        post_json(Client(), "/api/v1/runs", _variant(smoke_run, 11 + i, 59.0), alice_key).json()
        for i in range(3)
    ]
    assert [b["attempts"] for b in bodies] == [1, 2, 3]
    public = Client().get(f"/api/v1/runs/{bodies[-1]['id']}").json()
    assert public["attempts"] == 3
    queue = bob_client.get("/moderation/?status=approved").content.decode()
    assert "Attempts" in queue


def test_a_failed_sweep_cell_does_not_count_against_reliability(alice_key, smoke_run) -> None:
    """The depth and concurrency sweeps are measured, never scored: the engine leaves their cells
    out of reliability, and so must the check that recomputes it."""
    data = copy.deepcopy(smoke_run)
    cell = {"score": 0.0, "passed": False, "latency_ms": 0.0, "error": "HTTP 500: busy"}
    data["suites"]["speed_sweep"] = {
        "suite": "speed_sweep",
        "score": 50.0,
        "task_count": 2,
        "pass_count": 1,
        "fail_count": 1,
        "median_latency_ms": 0.0,
        "tasks": [
            {**cell, "task_id": "sweep-depth-0", "execution_ok": False},
            {**cell, "task_id": "sweep-depth-4096", "execution_ok": True, "passed": True},
        ],
    }
    body = post_json(Client(), "/api/v1/runs", data, alice_key).json()
    assert not any("reliability" in reason for reason in body["flag_reasons"]), body


def test_moderators_see_a_slow_run_annotated(
    approved_peers, alice_key, smoke_run, bob_client
) -> None:
    body = post_json(Client(), "/api/v1/runs", _variant(smoke_run, 9, 5.0), alice_key).json()
    assert (body["status"], body["flag_reasons"]) == ("pending", [])
    queue = bob_client.get("/moderation/").content.decode()
    assert "slower than 5 of 5 peers: throttling or offload?" in queue
