"""Rows stored before the input rules existed (written here straight to the database, past
every check) still render on every page, feed, export, image and API answer, and their emails
still go: XML and email headers clean text on the way out (runs.bounds)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from lab import services as lab
from lab.models import BenchmarkJob
from lab.notifications import notify_finished
from leaderboard.tests.factories import add_runs, record
from runs.models import Hardware, Run, Stack
from runs.services import refresh_stack_stats
from submissions.models import Submission
from submissions.tests.surfaces import assert_renders, public_urls

pytestmark = pytest.mark.django_db
ATOM = "{http://www.w3.org/2005/Atom}"
# Every class of character the input rules now refuse, except NUL (no Postgres text holds it).
OLD = "a\x07b\x0bc\x1bd\x7fe\x85f\ufffeg\uffffh\ni\u202ej\tk"


@pytest.fixture
def old_run() -> Run:
    add_runs(record(model_id="baseline:8b"))
    (run,) = add_runs(record(model_id="plain:8b", submitter="ada"))
    Stack.objects.filter(pk=run.stack_id).update(
        model_id=f"m{OLD}", quantization=OLD, engine=OLD, draft_model=OLD, model_family=OLD
    )
    Hardware.objects.filter(pk=run.hardware_id).update(gpu_model=f"RTX {OLD}", cpu_model=OLD)
    Submission.objects.filter(run=run).update(submitter_name=f"s{OLD}")
    Run.objects.filter(pk=run.pk).update(
        engine_version=OLD, harness_version=OLD[:20], command_used=OLD, benchmark_version=OLD[:20]
    )
    refresh_stack_stats(stack_ids=[run.stack_id])
    return Run.objects.select_related("stack", "submission").get(pk=run.pk)


@pytest.fixture
def old_job(operator) -> BenchmarkJob:
    job = lab.queue_job(requested_by=operator, model="fine", endpoint_url="http://h/v1")
    BenchmarkJob.objects.filter(pk=job.pk).update(
        model=f"job{OLD}",
        suites=[OLD],
        profile="",
        error=f"server said {OLD}",
        status=BenchmarkJob.Status.FAILED,
        finished_at=timezone.now(),
    )
    return BenchmarkJob.objects.get(pk=job.pk)


def test_old_rows_render_on_every_public_surface(old_run, old_job, bob_client) -> None:
    client = Client()
    for url in public_urls(old_run):
        assert_renders(client, url)
    assert_renders(client, "/leaderboard/?scale=all&comparable=all", {"HX-Request": "true"})
    for url in ("/lab/", f"/lab/jobs/{old_job.pk}/", f"/api/v1/jobs/{old_job.pk}"):
        assert_renders(client, url)
    assert_renders(bob_client, f"/runs/{old_run.id}/")


def test_the_feeds_stay_well_formed_and_show_the_rest_of_the_name(old_run, old_job) -> None:
    for url, marker in (
        ("/leaderboard/feed.atom?scale=all&comparable=all", "m"),
        ("/lab/jobs/feed.atom", "job"),
    ):
        feed = ET.fromstring(Client().get(url).content)
        titles = [e.findtext(f"{ATOM}title") or "" for e in feed.iter(f"{ATOM}entry")]
        shown = next(t for t in titles if f"{marker}a\ufffdb" in t)
        # What XML can hold is kept as it was; only what it cannot is replaced.
        assert "\u202ej" in shown and "\x85" in shown, shown


def test_a_control_character_in_the_query_string_does_not_break_the_feed() -> None:
    add_runs(record(model_id="plain:8b"))
    response = Client().get("/leaderboard/feed.atom", {"q": "qwen\x07\x1b", "scale": "all"})
    assert response.status_code == 200
    ET.fromstring(response.content)


def test_the_lab_email_is_one_line_whatever_the_jobs_model_holds(old_job) -> None:
    BenchmarkJob.objects.filter(pk=old_job.pk).update(model="evil\r\nBcc: victim@example.org")
    notify_finished(old_job.pk)
    (message,) = mail.outbox
    assert "\n" not in message.subject and "\r" not in message.subject
    assert not message.bcc
