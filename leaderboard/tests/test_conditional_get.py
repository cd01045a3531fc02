"""Feeds and exports carry ETag and Last-Modified and answer 304 while the data is unchanged;
publishing or withdrawing a run changes both at once."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from lab import services as lab
from lab.models import BenchmarkJob
from leaderboard.tests.factories import add_runs, ensure_lanes, record
from submissions.intake import set_published
from submissions.models import Status

pytestmark = pytest.mark.django_db

BOARD_URLS = [
    "/leaderboard/export.csv",
    "/leaderboard/export.json?engine=llama.cpp",
    "/leaderboard/export.md",
    "/leaderboard/feed.atom",
]


@pytest.mark.parametrize("url", BOARD_URLS)
def test_a_board_export_or_feed_answers_304_until_the_board_changes(client: Client, url) -> None:
    first_run, *_ = add_runs(record(model_id="a:8b"), record(model_id="b:8b"))
    first = client.get(url)
    assert first.status_code == 200 and first.content
    etag, modified = first["ETag"], first["Last-Modified"]
    assert etag.startswith('"') and "no-cache" in first["Cache-Control"]

    for headers in ({"If-None-Match": etag}, {"If-Modified-Since": modified}):
        again = client.get(url, headers=headers)
        assert again.status_code == 304, headers
        assert again.content == b"" and again["ETag"] == etag
        assert client.head(url, headers=headers).status_code == 304

    # A newly published run changes the answer: the same validators now fetch it.
    add_runs(record(model_id="newest:8b"))
    changed = client.get(url, headers={"If-None-Match": etag})
    assert changed.status_code == 200 and b"newest:8b" in changed.content
    assert changed["ETag"] != etag

    # So does a withdrawal: a run that is no longer public never lingers in a 304.
    current = changed["ETag"]
    set_published(first_run, Status.WITHDRAWN)
    ensure_lanes()  # the lanes without it (runs.services will refresh them on moderation)
    after = client.get(url, headers={"If-None-Match": current})
    assert after.status_code == 200 and after["ETag"] != current
    assert b"a:8b" not in after.content


def test_each_view_and_filter_has_its_own_etag(client: Client) -> None:
    add_runs(record(model_id="a:8b"))
    etags = {client.get(url)["ETag"] for url in BOARD_URLS}
    etags.add(client.get("/leaderboard/export.csv?engine=vllm")["ETag"])
    assert len(etags) == len(BOARD_URLS) + 1


def test_the_job_feed_answers_304_until_another_job_finishes(client: Client, operator) -> None:
    def finished_job(model: str) -> BenchmarkJob:
        job = lab.queue_job(
            requested_by=operator, model=model, endpoint_url="http://10.0.0.1/v1", pool="gpu"
        )
        BenchmarkJob.objects.filter(pk=job.pk).update(
            status="succeeded", finished_at=timezone.now()
        )
        return job

    finished_job("first-model")
    first = client.get("/lab/jobs/feed.atom")
    assert first.status_code == 200 and b"first-model" in first.content
    etag = first["ETag"]
    assert client.get("/lab/jobs/feed.atom", headers={"If-None-Match": etag}).status_code == 304
    modified = {"If-Modified-Since": first["Last-Modified"]}
    assert client.get("/lab/jobs/feed.atom", headers=modified).status_code == 304

    finished_job("second-model")
    changed = client.get("/lab/jobs/feed.atom", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and b"second-model" in changed.content
