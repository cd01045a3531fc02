"""Issue 32: a job names what it runs (its suites where it names them: the agent then ignores the
profile), and the example on an empty queue goes once a real job is there."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from lab import services

pytestmark = pytest.mark.django_db


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_a_job_of_named_suites_is_labelled_by_them(operator, lab_hosts) -> None:
    job = services.queue_job(
        requested_by=operator,
        model="qwen3-8b-q4",
        endpoint_url="http://10.0.0.9",
        pool="cpu",
        profile="smoke",
        suites=["speed"],
    )
    client = Client()
    client.force_login(operator)
    page = _text(client.get(f"/lab/jobs/{job.pk}/").content.decode())
    assert "suites speed" in page
    assert "profile smoke" not in page
    queue = _text(client.get("/lab/").content.decode())
    assert "suites speed" in queue and "profile smoke" not in queue
    # The example row is for an empty queue only.
    assert "not a real job" not in queue


def test_a_job_of_a_profile_is_labelled_by_it(operator, lab_hosts) -> None:
    job = services.queue_job(
        requested_by=operator,
        model="qwen3-8b-q4",
        endpoint_url="http://10.0.0.9",
        pool="cpu",
        profile="core",
    )
    page = _text(Client().get(f"/lab/jobs/{job.pk}/").content.decode())
    assert "profile core" in page and "suites" not in page.split("profile core")[0][-40:]
