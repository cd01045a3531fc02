"""An outage that strikes outside a view (in a middleware, on the way out) still answers 503."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from django.test import Client
from redis.exceptions import ConnectionError as RedisConnectionError

pytestmark = pytest.mark.django_db

FAILURES = {
    "database": OperationalError("server closed the connection unexpectedly"),
    "redis": RedisConnectionError("Connection refused"),
    "bug": ValueError("a plain bug"),
}


class FailOnTheWayOut:
    """Raises what the X-Fail header names after the view has answered, as a session save
    would when the database goes away mid-request."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        failure = request.headers.get("X-Fail")
        if failure:
            raise FAILURES[failure]
        return response


@pytest.fixture
def client(settings) -> Client:
    # Inside the session middleware, like the session save it stands for.
    position = settings.MIDDLEWARE.index("django.contrib.sessions.middleware.SessionMiddleware")
    settings.MIDDLEWARE = [
        *settings.MIDDLEWARE[: position + 1],
        f"{__name__}.FailOnTheWayOut",
        *settings.MIDDLEWARE[position + 1 :],
    ]
    return Client(raise_request_exception=False)


@pytest.mark.parametrize(
    ("failure", "code"), [("database", "database_unavailable"), ("redis", "queue_unavailable")]
)
def test_an_outage_after_the_view_answers_503_with_retry_after(client, failure, code) -> None:
    api = client.get("/api/v1/leaderboard", headers={"X-Fail": failure})
    assert api.status_code == 503
    assert api.json()["error"]["code"] == code
    assert api["Retry-After"] == "5"

    page = client.get("/methodology/", headers={"X-Fail": failure})
    assert page.status_code == 503
    assert page["Retry-After"] == "5"
    assert "Try again in a few seconds" in page.content.decode()


def test_any_other_error_is_a_500_in_the_apis_error_shape_and_a_plain_page(client) -> None:
    api = client.get("/api/v1/leaderboard", headers={"X-Fail": "bug"})
    assert api.status_code == 500
    assert api.json() == {
        "error": {"code": "server_error", "message": "Something went wrong on our side."}
    }
    page = client.get("/methodology/", headers={"X-Fail": "bug"})
    assert page.status_code == 500
    assert "a plain bug" not in page.content.decode()  # no internals on the page


def test_without_a_failure_the_pages_answer_as_usual(client) -> None:
    assert client.get("/api/v1/leaderboard").status_code == 200
    assert client.get("/methodology/").status_code == 200
