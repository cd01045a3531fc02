"""The legacy anonymous upload keys its uploader by the client's address, as the throttles see
it: behind the TLS proxy (NUM_PROXIES=1) that is X-Forwarded-For, not the proxy's own address."""

from __future__ import annotations

import pytest
from django.test import Client

from submissions.models import Channel, Submission
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db

PROXY = "10.0.0.2"


@pytest.fixture
def behind_one_proxy(settings) -> None:
    # DRF reloads its api_settings when REST_FRAMEWORK changes, so the throttles see it too.
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}


def _uploader_keys() -> list[str]:
    submissions = Submission.objects.filter(channel=Channel.LEGACY_ANONYMOUS).order_by("pk")
    return [submission.uploader_key for submission in submissions]


def test_two_clients_behind_the_proxy_are_two_uploaders(
    behind_one_proxy, v2_run, smoke_run
) -> None:
    for run, forwarded_for in ((v2_run, "203.0.113.7"), (smoke_run, "198.51.100.9")):
        response = post_json(
            Client(), "/submit", run, REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=forwarded_for
        )
        assert response.status_code == 200
    first, second = _uploader_keys()
    assert first != second


def test_one_client_behind_the_proxy_is_one_uploader(behind_one_proxy, v2_run, smoke_run) -> None:
    # The proxy appends the peer it saw; what the client wrote before it is not trusted.
    for run, forwarded_for in ((v2_run, "192.0.2.1, 203.0.113.7"), (smoke_run, "203.0.113.7")):
        response = post_json(
            Client(), "/submit", run, REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=forwarded_for
        )
        assert response.status_code == 200
    first, second = _uploader_keys()
    assert first == second
