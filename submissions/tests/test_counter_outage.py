"""Throttle counters that cannot be written: the API throttles fail open, the sign-in lockout
fails closed, and neither answers 500 (core/throttling.py says why).

Two real failures of the "limits" cache: a Redis that does not answer (nothing listens on its
port), and the embedded default's file cache on a disk that is full (a small tmpfs).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from worker.engine.testing.xllama_launcher import free_port
from worker.tests.disk import fill, tmpfs

pytestmark = pytest.mark.django_db
PASSWORD = "the member's long password"


@pytest.fixture
def member(db) -> User:
    return User.objects.create_user("erin", "erin@example.org", PASSWORD)


@pytest.fixture
def redis_down(settings) -> None:
    settings.CACHES = {
        **settings.CACHES,
        "limits": {
            "BACKEND": "core.cache.ReusingRedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
        },
    }


@pytest.fixture
def disk_full(settings, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "1m") as disk:
        settings.CACHES = {
            **settings.CACHES,
            "limits": {
                "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                "LOCATION": str(disk / "limits"),
            },
        }
        (disk / "limits").mkdir()
        fill(disk)
        yield


def _sign_in(password: str):
    client = Client(raise_request_exception=False)
    answer = client.post("/account/login/", {"username": "erin", "password": password})
    return client, answer


def test_the_api_keeps_answering_unthrottled_while_the_counters_redis_is_down(
    redis_down, caplog
) -> None:
    with caplog.at_level(logging.WARNING, logger="core.throttling"):
        answer = Client(raise_request_exception=False).get("/api/v1/leaderboard")
    assert answer.status_code == 200
    assert "throttle anon not counted (failing open)" in caplog.text


def test_the_api_keeps_answering_unthrottled_while_the_counters_disk_is_full(disk_full) -> None:
    answer = Client(raise_request_exception=False).get("/api/v1/leaderboard")
    assert answer.status_code == 200


def test_sign_in_is_refused_while_its_lockout_cannot_be_checked(member, redis_down) -> None:
    for password in ("a wrong guess", PASSWORD):
        client, answer = _sign_in(password)
        assert answer.status_code == 503
        assert answer["Retry-After"] == "5"
        assert "queue and cache server is unavailable" in answer.content.decode()
        assert "_auth_user_id" not in client.session


def test_a_failed_sign_in_that_cannot_be_counted_on_a_full_disk_answers_507(
    member, disk_full
) -> None:
    client, answer = _sign_in("a wrong guess")
    assert answer.status_code == 507
    page = answer.content.decode()
    assert "server&#x27;s disk is full" in page and "database is unavailable" not in page
    assert "_auth_user_id" not in client.session
