"""Reports reach the moderators; one account without standing cannot unpublish runs with them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import Run
from submissions.models import RunReport, Status, Submission
from submissions.services import moderate_submission, set_trusted
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db


def _approved_runs(key: str, payload: dict, count: int) -> list[int]:
    ids = []
    for n in range(count):
        body = {**payload, "run_id": f"reported-{n}", "timestamp": payload["timestamp"]}
        body["overall_score"] = 50 + n
        response = post_json(Client(), "/api/v1/runs", body, key)
        assert response.status_code == 201, response.content
        ids.append(response.json()["id"])
    for submission in Submission.objects.filter(run_id__in=ids):
        moderate_submission(submission=submission, status=Status.APPROVED, moderator=None)
    return ids


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _report(user: User, run_id: int, reason: str = "numbers look faked"):
    return _client(user).post(f"/runs/{run_id}/report/", {"reason": reason})


def _reporters(n: int) -> list[User]:
    return [
        User.objects.create_user(f"reporter{i}", f"r{i}@example.org", "pw-pw-pw-1")
        for i in range(n)
    ]


def test_one_account_reporting_every_run_unpublishes_none(
    alice_key, smoke_run, mallory, bob_client
) -> None:
    ids = _approved_runs(alice_key, smoke_run, 4)
    for run_id in ids:
        assert _report(mallory, run_id).status_code == 302
    assert Run.objects.filter(id__in=ids, published=True).count() == 4
    assert set(Submission.objects.values_list("status", flat=True)) == {Status.APPROVED}
    assert Client().get(f"/runs/{ids[0]}/").status_code == 200
    # Every report is in the moderators' queue, as a report on a run that is still public.
    queue = bob_client.get("/moderation/").content.decode()
    assert queue.count("numbers look faked") == 4
    assert "1 open report" in queue and "(still public)" in queue
    reported = bob_client.get("/moderation/?status=reported").content.decode()
    assert reported.count("numbers look faked") == 4


def test_enough_distinct_reporters_send_a_run_back_to_the_queue(
    settings, alice_key, smoke_run
) -> None:
    settings.BENCHLOOP_REPORTS_TO_HIDE_RUN = 3
    (run_id,) = _approved_runs(alice_key, smoke_run, 1)
    first, second, third = _reporters(3)
    _report(first, run_id)
    _report(first, run_id)  # the same account twice is still one reporter
    _report(second, run_id)
    assert Run.objects.get(pk=run_id).published
    _report(third, run_id, "TTFT impossible for this card")
    submission = Submission.objects.get(run_id=run_id)
    assert submission.status == Status.FLAGGED and not submission.run.published
    assert "reported by 3 users" in submission.moderation_note


def test_the_submitters_own_report_does_not_count_toward_the_threshold(
    settings, alice, alice_key, smoke_run
) -> None:
    settings.BENCHLOOP_REPORTS_TO_HIDE_RUN = 2
    (run_id,) = _approved_runs(alice_key, smoke_run, 1)
    (other,) = _reporters(1)
    _report(alice, run_id)
    _report(other, run_id)
    assert Run.objects.get(pk=run_id).published


@pytest.mark.parametrize("standing", ["moderator", "trusted"])
def test_a_report_from_someone_with_standing_acts_at_once(
    standing, alice_key, smoke_run, bob, mallory
) -> None:
    (run_id,) = _approved_runs(alice_key, smoke_run, 1)
    reporter = bob if standing == "moderator" else mallory
    if standing == "trusted":
        set_trusted(user=mallory, trusted=True, moderator=bob)
    _report(reporter, run_id)
    submission = Submission.objects.get(run_id=run_id)
    assert submission.status == Status.FLAGGED
    assert f"reported by {reporter.username}" in submission.moderation_note


def test_a_moderators_decision_resolves_the_open_reports(
    alice_key, smoke_run, mallory, bob, bob_client
) -> None:
    (run_id,) = _approved_runs(alice_key, smoke_run, 1)
    _report(mallory, run_id)
    submission = Submission.objects.get(run_id=run_id)
    bob_client.post("/moderation/decide/", {"submissions": [submission.pk], "status": "approved"})
    report = RunReport.objects.get()
    assert report.resolved_at is not None and report.resolved_by == bob
    assert "numbers look faked" not in bob_client.get("/moderation/").content.decode()
    # Reporting again reopens the report for the moderators.
    _report(mallory, run_id, "still wrong")
    assert RunReport.objects.open().count() == 1
    assert "still wrong" in bob_client.get("/moderation/").content.decode()


def test_reports_per_account_are_rate_limited(form_rates, alice_key, smoke_run, mallory) -> None:
    form_rates["report"] = "2/day"
    ids = _approved_runs(alice_key, smoke_run, 3)
    assert [_report(mallory, run_id).status_code for run_id in ids] == [302, 302, 429]
    refused = _report(mallory, ids[2])
    assert 0 < int(refused["Retry-After"]) <= 86400
    assert RunReport.objects.filter(reporter=mallory).count() == 2
