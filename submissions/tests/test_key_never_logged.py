"""An API key's plaintext never reaches a log line, an SQL statement or an error report: not when
it is created (page or device login), used, used for an upload, or refused. The 8-character
lookup prefix may appear; the key may not."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from django.db import connection
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.views.debug import ExceptionReporter

from submissions.models import ApiKey
from submissions.services import create_api_key
from submissions.tests.conftest import post_json
from worker.engine.testing.xllama_launcher import free_port

REPO = Path(__file__).resolve().parents[2]
KEY = re.compile(r"bl_[A-Za-z0-9]{40,}")


def _everything_logged(records: list[logging.LogRecord]) -> str:
    parts = []
    for record in records:
        parts.append(record.getMessage())
        parts.append(repr(record.args))
        parts.append(repr({k: v for k, v in vars(record).items() if k not in ("args", "msg")}))
    return "\n".join(parts)


@pytest.mark.django_db
def test_no_key_appears_in_logs_or_sql_through_its_whole_life(
    caplog, alice, alice_client, smoke_run
) -> None:
    caplog.set_level(logging.DEBUG)
    keys: list[str] = []
    with CaptureQueriesContext(connection) as queries:
        # Created on the keys page, shown once.
        page = alice_client.post("/account/keys/", {"name": "ci", "scopes": ["submit", "read"]})
        keys.append(KEY.search(page.content.decode()).group())
        # Created by a device login.
        client = Client()
        started = post_json(client, "/api/v1/device/start", {}).json()
        alice_client.post("/device/", {"code": started["user_code"]})
        token = post_json(client, "/api/v1/device/token", {"device_code": started["device_code"]})
        keys.append(token.json()["api_key"])
        good = keys[0]
        # Used: reads, an upload, a repeat, a delete.
        auth = {"Authorization": f"Bearer {good}"}
        uploaded = post_json(client, "/api/v1/runs", smoke_run, good)
        assert uploaded.status_code == 201
        assert post_json(client, "/api/v1/runs", smoke_run, good).status_code == 200
        assert client.get("/api/v1/leaderboard", headers=auth).status_code == 200
        run_id = uploaded.json()["id"]
        assert client.delete(f"/api/v1/runs/{run_id}", headers=auth).status_code == 204
        # Refused: a wrong secret behind a real prefix, a revoked key, a malformed upload.
        forged = good[:11] + "A" * (len(good) - 11)
        assert post_json(client, "/api/v1/runs", smoke_run, forged).status_code == 401
        ApiKey.objects.filter(prefix=keys[1][3:11]).update(revoked_at=timezone.now())
        revoked = {"Authorization": f"Bearer {keys[1]}"}
        assert client.get("/api/v1/leaderboard", headers=revoked).status_code == 401
        assert post_json(client, "/api/v1/runs", smoke_run, keys[1]).status_code == 401
        assert post_json(client, "/api/v1/runs", "{not json", good).status_code == 400
        assert client.get("/account/keys/", headers=auth).status_code == 302  # no session
    logged = caplog.text + _everything_logged(caplog.records)
    sql = "\n".join(q["sql"] for q in queries.captured_queries)
    assert "Unauthorized: /api/v1/runs" in logged  # the refusals were logged, just not the key
    for key in [*keys, forged]:
        assert key not in logged and key not in sql
        assert key[len("bl_") :] not in logged


@pytest.mark.django_db
def test_an_error_report_hides_the_authorization_header(alice) -> None:
    """The 500 report (mailed to admins, or shown with DEBUG) scrubs the Authorization header."""
    _, key = create_api_key(user=alice, name="x", scopes=["read"])
    request = RequestFactory().get(
        "/api/v1/leaderboard", headers={"Authorization": f"Bearer {key}"}
    )
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        report = ExceptionReporter(request, *sys.exc_info())
        text = report.get_traceback_text()
    assert "HTTP_AUTHORIZATION" in text and key not in text


def _production_gunicorn_args() -> list[str]:
    """The web service's gunicorn flags from docker-compose.yml, so the test follows them."""
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    command = list(compose["services"]["web"]["command"])
    assert command[0] == "gunicorn"
    if "--bind" in command:
        index = command.index("--bind")
        del command[index : index + 2]
    return command[1:]


@pytest.mark.django_db(transaction=True)
def test_the_gunicorn_access_and_error_logs_never_hold_a_key(tmp_path, smoke_run) -> None:
    from django.contrib.auth.models import User

    alice = User.objects.create_user("alice", "alice@example.org", "correct horse battery")
    _, key = create_api_key(user=alice, name="laptop", scopes=["submit", "read"])
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        ),
        "LOG_LEVEL": "DEBUG",
    }
    port = free_port()
    args = _production_gunicorn_args()
    if "--access-logfile" in args:
        args[args.index("--access-logfile") + 1] = str(tmp_path / "access.log")
    else:
        args += ["--access-logfile", str(tmp_path / "access.log")]
    args += ["--bind", f"127.0.0.1:{port}", "--workers", "1", "--log-level", "debug"]
    output = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", *args], cwd=REPO, env=env, stdout=output, stderr=output
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code < 500:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        auth = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, timeout=30) as http:
            assert http.post("/api/v1/runs", json=smoke_run, headers=auth).status_code == 201
            assert http.get("/api/v1/leaderboard", headers=auth).status_code == 200
            bad = {"Authorization": f"Bearer {key[:11]}{'B' * (len(key) - 11)}"}
            assert http.post("/api/v1/runs", json=smoke_run, headers=bad).status_code == 401
            assert http.get("/api/v1/hardware", headers={"Authorization": key}).status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=30)
        output.close()
    access = (tmp_path / "access.log").read_text()
    logs = access + (tmp_path / "server.log").read_text()
    assert '"POST /api/v1/runs HTTP/1.1" 201' in access and " 401 " in access
    assert key not in logs and key[len("bl_") :] not in logs
