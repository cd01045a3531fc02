"""Requests whose framing used to break pages: chunked bodies (read as empty by Django's WSGI
request), and a NUL in the session cookie (every page a 500). Tested against the production
gunicorn command with real chunked requests, and through the test client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from django.conf import settings
from django.db import connection
from django.test import Client

from lab.tests.lab import wait_for
from runs.models import Run
from submissions.services import create_api_key
from submissions.tests.test_key_never_logged import REPO, _production_gunicorn_args
from worker.engine.testing.xllama_launcher import free_port

LIMIT = 200_000
NUL_SESSION = '"\\000' + "a" * 31 + '"'  # how a cookie header carries NUL: Django decodes \000


@pytest.fixture
def gunicorn(transactional_db, tmp_path) -> Iterator[str]:
    """The web service's gunicorn command on the test database, with a 200 kB upload limit."""
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        ),
        "BENCHLOOP_MAX_UPLOAD_BYTES": str(LIMIT),
    }
    port = free_port()
    args = [*_production_gunicorn_args(), "--bind", f"127.0.0.1:{port}", "--workers", "1"]
    log = (tmp_path / "gunicorn.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", *args], cwd=REPO, env=env, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(f"{base}/healthz"), 60, "gunicorn to answer")
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


def _chunks(body: bytes, size: int = 4096) -> Iterator[bytes]:
    # A generator body: httpx sends it with Transfer-Encoding: chunked and no Content-Length.
    for start in range(0, len(body), size):
        yield body[start : start + size]


def test_a_chunked_upload_through_gunicorn_is_read_whole(gunicorn, alice, smoke_run) -> None:
    key = create_api_key(user=alice, name="laptop", scopes=["submit", "read"])[1]
    body = json.dumps(smoke_run).encode()
    assert len(body) < LIMIT
    seen: list[httpx.Request] = []
    with httpx.Client(
        base_url=gunicorn, timeout=30, event_hooks={"request": [seen.append]}
    ) as http:
        response = http.post(
            "/api/v1/runs",
            content=_chunks(body),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        )
    assert seen[0].headers["Transfer-Encoding"] == "chunked"
    assert "Content-Length" not in seen[0].headers
    assert response.status_code == 201, response.text
    run = Run.objects.get(pk=response.json()["id"])
    assert run.suite_results.count() == len(smoke_run["suites"])


def test_a_chunked_body_over_the_limit_is_a_413(gunicorn, alice) -> None:
    key = create_api_key(user=alice, name="laptop", scopes=["submit", "read"])[1]
    with httpx.Client(base_url=gunicorn, timeout=30) as http:
        response = http.post(
            "/api/v1/runs",
            content=_chunks(b'{"pad": "' + b"x" * (LIMIT + 10_000) + b'"}'),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert not Run.objects.exists()


def test_a_nul_in_the_session_cookie_through_gunicorn_costs_only_the_session(gunicorn) -> None:
    with httpx.Client(base_url=gunicorn, timeout=30) as http:
        for path in ("/", "/leaderboard/", "/account/login/"):
            response = http.get(path, headers={"Cookie": f"sessionid={NUL_SESSION}"})
            assert response.status_code == 200, (path, response.text[:300])


@pytest.mark.django_db
def test_a_chunked_body_a_server_cannot_end_is_a_411_not_an_empty_body(alice_key) -> None:
    """Behind a server that does not mark where a chunked body ends (no wsgi.input_terminated,
    as here in the test client), the body cannot be read safely: ask for a Content-Length."""
    response = Client().post(
        "/api/v1/runs",
        data=b"{}",
        content_type="application/json",
        headers={"Authorization": f"Bearer {alice_key}", "Transfer-Encoding": "chunked"},
    )
    assert response.status_code == 411
    assert response.json()["error"]["code"] == "length_required"
    page = Client().post("/theme/", {"theme": "dark"}, headers={"Transfer-Encoding": "chunked"})
    assert page.status_code == 411


@pytest.mark.django_db
def test_a_nul_in_the_session_cookie_starts_a_fresh_session(alice) -> None:
    client = Client()
    client.cookies.load(f"sessionid={NUL_SESSION}")
    assert "\x00" in client.cookies[settings.SESSION_COOKIE_NAME].value
    for path in ("/", "/leaderboard/", "/methodology/", "/account/login/", "/lab/"):
        assert client.get(path).status_code == 200, path
    # A visitor who then signs in gets a proper session in place of the broken cookie.
    response = client.post(
        "/account/login/", {"username": "alice", "password": "correct horse battery"}
    )
    assert response.status_code == 302
    assert "\x00" not in client.cookies[settings.SESSION_COOKIE_NAME].value
    assert client.get("/account/").status_code == 200
