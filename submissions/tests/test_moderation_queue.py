"""The moderator's queue: access, evidence, bulk decisions, audit log, trust, reports, email."""

from __future__ import annotations

import copy
import json

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape

from runs.models import Run
from submissions import services
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


# --- issue 18: what a moderator needs to decide, on the queue itself -------------------------

ISSUE_EXAMPLE = "decode 900 tok/s &gt; ceiling 207 tok/s = 1,008 GB/s ÷ 4.87 GB active weights"


def _speed_run(base: dict, decode: float, *, index: int, ttft: float = 37.0) -> dict:
    """The smoke fixture as a distinct llama3.1:8b Q4_K_M run on an RTX 4090 at `decode`."""
    data = copy.deepcopy(base)
    data["run_id"] = f"queue-{index}-{decode}"
    data["timestamp"] = f"2026-11-{10 + index:02d}T10:00:00+00:00"
    data["model"] = {**data["model"], "model_id": "llama3.1:8b", "quantization": "Q4_K_M"}
    data["machine"] = {**data["machine"], "gpu": "NVIDIA GeForce RTX 4090", "gpu_count": 1}
    for task in data["suites"]["speed"]["tasks"]:
        for trial in task["metadata"]["trials"]:
            trial["speed_metrics"]["generation_tok_per_sec"] = decode
            trial["speed_metrics"]["ttft_ms"] = ttft
    return data


def _upload(data: dict, key: str) -> dict:
    response = post_json(Client(), "/api/v1/runs", data, key)
    assert response.status_code == 201, response.content
    return response.json()


def _card(html: str, run_id: int) -> str:
    """One run's card in the queue (from its heading to the next card)."""
    start = html.index(f'id="run-{run_id}"')
    end = html.find('<li class="mod-item', start)
    return html[start : end if end != -1 else len(html)]


def _section(card: str, name: str) -> str:
    start = card.index(f'class="mod-{name}"')
    return card[start : card.index("</section>", start)]


@pytest.fixture
def peers(mallory, mallory_key, smoke_run) -> list[int]:
    """Three approved runs of the same stack on the same hardware class, around 140 tok/s."""
    SubmitterProfile.objects.create(user=mallory, is_trusted=True)
    ids = []
    for index, decode in enumerate([138.0, 140.0, 143.0]):
        body = _upload(_speed_run(smoke_run, decode, index=index), mallory_key)
        assert body["status"] == "approved"
        ids.append(body["id"])
    return ids


def test_run_names_link_to_their_page_which_a_moderator_opens_while_pending(
    bob_client, pending_run, mallory
) -> None:
    html = bob_client.get("/moderation/").content.decode()
    assert f'<a href="/runs/{pending_run}/">example-model:8b' in html
    page = bob_client.get(f"/runs/{pending_run}/")
    assert page.status_code == 200 and "example-model:8b" in page.content.decode()
    # Still pending: nobody else sees it.
    assert Client().get(f"/runs/{pending_run}/").status_code == 404
    other = Client()
    other.force_login(mallory)
    assert other.get(f"/runs/{pending_run}/").status_code == 404


def test_the_queue_says_whether_each_run_is_complete(bob_client, alice_key, smoke_run) -> None:
    complete = _upload(_speed_run(smoke_run, 140.0, index=1), alice_key)["id"]
    partial = _speed_run(smoke_run, 141.0, index=2)
    partial["status"] = "incomplete"
    partial["coverage_score"] = 37.5
    incomplete = _upload(partial, alice_key)["id"]
    html = bob_client.get("/moderation/").content.decode()
    first = _card(html, complete)
    assert 'class="badge complete-complete"' in first
    assert "profile smoke" in first and "100% of the profile&#x27;s tasks scored" in first
    second = _card(html, incomplete)
    assert 'class="badge complete-incomplete"' in second and ">incomplete</span>" in second
    assert "37.5% of the profile&#x27;s tasks scored" in second


def test_numbers_carry_separators_and_units(bob_client, alice_key, smoke_run) -> None:
    run_id = _upload(_speed_run(smoke_run, 1234.5, index=1, ttft=13689.0), alice_key)["id"]
    card = _card(bob_client.get("/moderation/").content.decode(), run_id)
    figures = _section(card, "figures")
    assert "<dd>13,689 ms</dd>" in figures
    assert "<dd>1,234.5 tok/s</dd>" in figures
    assert "13689" not in card


def test_the_evidence_column_shows_evidence_not_the_status(
    bob_client, alice_key, smoke_run, peers
) -> None:
    flagged = _upload(_speed_run(smoke_run, 900.0, index=5), alice_key)
    assert flagged["status"] == "flagged"
    plausible = _upload(_speed_run(smoke_run, 145.0, index=6), alice_key)
    assert plausible["status"] == "pending"
    html = bob_client.get("/moderation/").content.decode()

    card = _card(html, flagged["id"])
    # The status is a badge beside the run's name, not the evidence.
    assert '<span class="badge status-flagged" title="Moderation status">flagged</span>' in card
    evidence = _section(card, "evidence")
    assert "status-" not in evidence and "pending" not in evidence
    # The ceiling's arithmetic, as submissions.integrity computes it...
    assert f'<span class="mark">flags:</span> {ISSUE_EXAMPLE} (RTX 4090' in evidence
    # ...and the peers, on the same hardware class.
    assert (
        '<span class="mark">flags:</span> decode speed 900.0 tok/s is 6.4× the median of 3 '
        "approved peers on RTX 4090 24 GB (140.0 tok/s; robust z = +54.3)"
    ) in evidence
    # What the upload check recorded is not repeated when the live checks say the same.
    assert "Recorded when it was checked" not in evidence

    evidence = _section(_card(html, plausible["id"]), "evidence")
    assert (
        '<span class="mark">ok:</span> decode 145 tok/s ≤ ceiling 207 tok/s = 1,008 GB/s ÷ '
        "4.87 GB active weights"
    ) in evidence
    assert "decode speed 145.0 tok/s is 1.0× the median of 3 approved peers" in evidence
    assert "flags:" not in evidence


def _remote_run(fixtures_dir) -> dict:
    return json.loads((fixtures_dir / "generated/v3-custom-remote/run.json").read_text())


def test_too_few_peers_and_remote_runs_say_why_there_is_no_comparison(
    bob_client, alice_key, smoke_run, fixtures_dir
) -> None:
    lonely = _upload(_speed_run(smoke_run, 140.0, index=1), alice_key)["id"]
    remote = _upload(_remote_run(fixtures_dir), alice_key)["id"]
    html = bob_client.get("/moderation/").content.decode()
    evidence = _section(_card(html, lonely), "evidence")
    assert (
        '<span class="mark">n/a:</span> decode speed: 0 approved peers on RTX 4090 24 GB, '
        "3 needed for a comparison"
    ) in evidence
    evidence = _section(_card(html, remote), "evidence")
    assert "remote endpoint: no machine was seen, so no ceiling and no hardware peers" in evidence


def test_the_queue_shows_the_submitters_history_and_attempts(
    bob_client, bob, alice, alice_key, smoke_run
) -> None:
    ids = [_upload(_speed_run(smoke_run, 140.0 + i, index=i), alice_key)["id"] for i in range(4)]
    by_run = {s.run_id: s for s in Submission.objects.all()}
    services.moderate_submission(submission=by_run[ids[0]], status="approved", moderator=bob)
    services.moderate_submission(
        submission=by_run[ids[1]], status="rejected", moderator=bob, reason="no"
    )
    services.withdraw_run(submission=by_run[ids[2]], user=alice)
    card = _card(bob_client.get("/moderation/").content.decode(), ids[3])
    people = _section(card, "people")
    assert "4 uploads:" in people
    for text in ("1 approved", "1 pending", "1 rejected", "1 withdrawn"):
        assert text in people
    assert "Attempts on this stack: 4" in people
    assert '<span class="badge">not trusted</span>' in people
    assert f'href="/moderation/submitters/{alice.pk}/trust/?next=/moderation/"' in people
    # alice has an approved run, so her public page exists and is linked.
    assert 'href="/submitters/alice/"' in people


def test_open_reports_show_on_the_run_they_are_against(
    bob_client, bob, mallory, pending_run
) -> None:
    submission = Submission.objects.get()
    services.moderate_submission(submission=submission, status="approved", moderator=bob)
    services.report_run(run=submission.run, reporter=mallory, reason="TTFT <b>looks</b> faked")
    card = _card(bob_client.get("/moderation/").content.decode(), pending_run)
    people = _section(card, "people")
    assert "1 open report" in people and "(still public)" in people
    assert "mallory" in people and "TTFT &lt;b&gt;looks&lt;/b&gt; faked" in people


def test_bulk_approve_and_reject_without_javascript(bob_client, bob, alice_key, smoke_run) -> None:
    ids = [_upload(_speed_run(smoke_run, 140.0 + i, index=i), alice_key)["id"] for i in range(3)]
    # "Tick every run on this page" is a link: the page comes back with every box ticked.
    html = bob_client.get("/moderation/?select=all").content.decode()
    assert html.count('name="submissions" value=') == 3
    assert html.count(" checked>") == 3
    assert '<input type="hidden" name="next" value="/moderation/">' in html
    assert '<input id="d-reason" name="reason"' in html
    picked = list(Submission.objects.filter(run_id__in=ids[:2]).values_list("pk", flat=True))
    response = bob_client.post(
        "/moderation/decide/",
        {
            "submissions": picked,
            "status": "rejected",
            "reason": "a fake GPU",
            "next": "/moderation/",
        },
        follow=True,
    )
    assert "2 submission(s) now rejected." in response.content.decode()
    assert set(
        Submission.objects.filter(status="rejected").values_list("run_id", flat=True)
    ) == set(ids[:2])
    assert {d.reason for d in ModerationDecision.objects.filter(moderator=bob)} == {"a fake GPU"}
    response = bob_client.post("/moderation/decide/", {"status": "approved"}, follow=True)
    assert "Tick at least one run: nothing was decided." in response.content.decode()
    response = bob_client.post(
        "/moderation/decide/",
        {"submissions": [Submission.objects.get(run_id=ids[2]).pk], "status": "rejected"},
        follow=True,
    )
    assert "Nothing was decided. Say why: the submitter is told." in response.content.decode()


def test_bulk_approve_with_htmx_answers_with_the_queue_fragment(
    bob_client, alice_key, smoke_run
) -> None:
    for i in range(2):
        _upload(_speed_run(smoke_run, 140.0 + i, index=i), alice_key)
    picked = list(Submission.objects.values_list("pk", flat=True))
    response = bob_client.post(
        "/moderation/decide/",
        {"submissions": picked, "status": "approved", "reason": "", "next": "/moderation/"},
        headers={"HX-Request": "true"},
        follow=True,
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="queue">') and "<html" not in html
    # The fragment shares the page's URL: it is never stored, and caches tell the two apart.
    assert "HX-Request" in response.headers["Vary"]
    assert "no-store" in response.headers["Cache-Control"]
    assert "2 submission(s) now approved." in html and "The queue is clear." in html
    assert Run.objects.filter(published=True).count() == 2


def test_own_runs_are_shown_but_never_ticked(bob_client, bob, smoke_run) -> None:
    from submissions.services import create_api_key

    key = create_api_key(user=bob, name="bob's", scopes=["submit"])[1]
    run_id = _upload(_speed_run(smoke_run, 140.0, index=1), key)["id"]
    html = bob_client.get("/moderation/?select=all").content.decode()
    card = _card(html, run_id)
    assert "your run" in html and 'name="submissions"' not in html
    assert "Your own run: another moderator decides on it." in card
    assert "/trust/" not in card


def test_every_stored_string_is_escaped(bob_client, alice, alice_key, smoke_run, mallory) -> None:
    run_id = _upload(_speed_run(smoke_run, 140.0, index=1), alice_key)["id"]
    evil = "<script>alert(1)</script>"
    run = Run.objects.get(pk=run_id)
    type(run.stack).objects.filter(pk=run.stack_id).update(model_id=evil)
    Submission.objects.filter(run_id=run_id).update(
        flag_reasons=[f"recorded {evil}"], moderation_note=f"note {evil}"
    )
    User.objects.filter(pk=alice.pk).update(username=f"alice{evil}")
    html = bob_client.get("/moderation/").content.decode()
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert f"recorded {escape(evil)}" in html and f"note {escape(evil)}" in html
    trust = bob_client.get(f"/moderation/submitters/{alice.pk}/trust/").content.decode()
    assert "<script>alert" not in trust and escape(evil) in trust


def test_the_queue_costs_the_same_queries_however_many_rows(
    bob_client, alice_key, mallory_key, smoke_run, peers, fixtures_dir
) -> None:
    _upload(_speed_run(smoke_run, 900.0, index=5), alice_key)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert bob_client.get("/moderation/").status_code == 200
        return len(captured)

    few = queries()
    for i in range(4):
        _upload(_speed_run(smoke_run, 150.0 + i, index=6 + i), alice_key)
    _upload(_remote_run(fixtures_dir), alice_key)
    _upload(_speed_run(smoke_run, 150.0, index=12), mallory_key)  # another submitter
    assert Submission.objects.needing_a_moderator().count() == 6
    assert queries() == few
    # Session, user, permissions, the page and its count, then one query per kind of evidence.
    assert few <= 12
