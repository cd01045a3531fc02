"""The site's own error pages (400, 403, 404, 500, 503/507) and the API's JSON error shape for
the same errors under /api/. Over HTTP with production settings: test_embedded_default.py."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client

from core.errors import bad_request, permission_denied
from core.unavailable import server_error

pytestmark = pytest.mark.django_db


def test_an_unknown_page_answers_the_sites_404_page() -> None:
    answer = Client().get("/stacks/999999999/")
    assert answer.status_code == 404
    page = answer.content.decode()
    assert '<h1 id="error-title">Page not found</h1>' in page
    assert 'class="site-header"' in page and 'href="/leaderboard/"' in page


def test_a_page_a_member_may_not_open_answers_the_sites_403_page(alice_client) -> None:
    answer = alice_client.get("/moderation/")
    assert answer.status_code == 403
    page = answer.content.decode()
    assert "You cannot open this page" in page and "alice" in page
    assert 'class="site-header"' in page


def test_a_form_sent_without_its_csrf_token_answers_the_sites_403_page(alice) -> None:
    answer = Client(enforce_csrf_checks=True).post(
        "/account/login/", {"username": "alice", "password": "correct horse battery"}
    )
    assert answer.status_code == 403
    page = answer.content.decode()
    assert "This form could not be checked" in page and 'class="site-header"' in page
    assert "CSRF verification failed" not in page


def test_a_superuser_may_open_the_moderation_queue(django_user_model) -> None:
    admin = django_user_model.objects.create_superuser("root", "root@example.org", "pw")
    client = Client()
    client.force_login(admin)
    assert client.get("/moderation/").status_code == 200


def test_the_500_page_needs_no_database(rf, django_db_blocker) -> None:
    """A failing site may have lost its database: the page must not reach for it."""
    with django_db_blocker.block():
        answer = server_error(rf.get("/runs/1/"))
    assert answer.status_code == 500
    page = answer.content.decode()
    assert "Something went wrong on our side" in page and 'class="site-header"' in page


@pytest.mark.parametrize(
    ("handler", "status", "code"),
    [(bad_request, 400, "bad_request"), (permission_denied, 403, "forbidden")],
)
def test_errors_under_the_api_keep_the_json_shape(rf, handler, status, code) -> None:
    answer = handler(rf.get("/api/v1/runs/1"), PermissionDenied())
    assert answer.status_code == status
    assert json.loads(answer.content)["error"]["code"] == code
    page = handler(rf.get("/runs/1/"), PermissionDenied())
    assert page.status_code == status and page["Content-Type"].startswith("text/html")


def test_a_host_the_site_does_not_serve_gets_a_json_400_under_the_api(settings) -> None:
    settings.ALLOWED_HOSTS = ["bench.example.org"]
    client = Client(HTTP_HOST="evil.example", raise_request_exception=False)
    answer = client.get("/api/v1/leaderboard")
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, "bad_request")
    page = client.get("/leaderboard/")
    assert page.status_code == 400
    assert "could not understand this request" in page.content.decode()
