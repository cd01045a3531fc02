from __future__ import annotations

import socket

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_it_reports_database_and_broker_ok(client: Client, settings) -> None:
    assert settings.CELERY_BROKER_URL.startswith("redis://")  # the real Redis of this machine
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok"}
    assert "no-cache" in response.headers["Cache-Control"]


def test_uptime_monitors_can_ask_with_head(client: Client) -> None:
    response = client.head("/healthz")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"


def test_it_fails_with_503_when_the_broker_is_down(client: Client) -> None:
    from benchloop_site.celery import app

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead_port = sock.getsockname()[1]
    # The stored settings, not the properties: broker_write_url reads as broker_url while it
    # is unset, and writing that back would pin every later publish of this process to it.
    original = {key: app.conf.get(key) for key in ("broker_url", "broker_write_url")}
    app.conf.broker_url = app.conf.broker_write_url = f"redis://127.0.0.1:{dead_port}/0"
    try:
        response = client.get("/healthz")
    finally:
        app.conf.update(original)
    assert response.status_code == 503
    assert response["Retry-After"] == "5"  # monitors and load balancers know when to ask again
    body = response.json()
    assert body["status"] == "error"
    assert body["database"] == "ok"
    assert body["broker"].startswith("error: ")
