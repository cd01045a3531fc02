"""API key lifecycle over HTTP: create and show once, list, revoke; scopes; other users' keys."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from submissions.models import ApiKey
from submissions.services import create_api_key
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db
KEY_RE = re.compile(r"bl_[A-Za-z0-9]{40,}")


def test_a_new_key_is_shown_once_and_stored_only_as_a_hash(alice_client: Client, alice) -> None:
    response = alice_client.post(
        "/account/keys/", {"name": "workstation", "scopes": ["submit", "read"]}
    )
    assert response.status_code == 200
    assert "no-store" in response.headers["Cache-Control"]
    keys_shown = KEY_RE.findall(response.content.decode())
    assert len(keys_shown) == 1
    plaintext = keys_shown[0]
    stored = ApiKey.objects.get(user=alice)
    assert stored.prefix == plaintext[3:11]
    assert plaintext not in (stored.hashed_key, stored.prefix)
    assert len(stored.hashed_key) == 64
    assert stored.scopes == ["read", "submit"]

    listing = alice_client.get("/account/keys/").content.decode()
    assert plaintext not in listing  # never shown again
    assert f"bl_{stored.prefix}…" in listing
    assert "workstation" in listing


def test_a_key_needs_at_least_one_known_scope(alice_client: Client) -> None:
    response = alice_client.post("/account/keys/", {"name": "x", "scopes": ["admin"]})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert ApiKey.objects.count() == 0


def test_a_revoked_key_is_rejected(
    alice_client: Client, alice, alice_key: str, smoke_run: dict
) -> None:
    client = Client()
    assert post_json(client, "/api/v1/runs", smoke_run, alice_key).status_code == 201
    key = ApiKey.objects.get(user=alice)
    assert key.last_used_at is not None

    response = alice_client.post(f"/account/keys/{key.pk}/revoke/")
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None

    response = post_json(client, "/api/v1/runs", smoke_run, alice_key)
    assert response.status_code == 401
    assert response.json() == {
        "error": {"code": "not_authenticated", "message": "This API key has been revoked."}
    }
    assert 'Bearer realm="api"' in response.headers["WWW-Authenticate"]


def test_a_read_only_key_cannot_submit(alice, smoke_run: dict) -> None:
    _, read_key = create_api_key(user=alice, name="dashboard", scopes=["read"])
    response = post_json(Client(), "/api/v1/runs", smoke_run, read_key)
    assert response.status_code == 403
    assert response.json()["error"]["message"] == "This API key lacks the 'submit' scope."


@pytest.mark.parametrize(
    "header",
    [
        "Bearer bl_short",
        "Bearer not-a-key",
        "Bearer " + "bl_" + "A" * 43,
        "Basic dXNlcjpwYXNz",
    ],
)
def test_malformed_or_unknown_keys_are_not_authenticated(header: str, smoke_run: dict) -> None:
    response = Client().post(
        "/api/v1/runs",
        data=smoke_run,
        content_type="application/json",
        headers={"Authorization": header},
    )
    assert response.status_code in (401, 403)
    assert response.json()["error"]["code"] in ("not_authenticated", "forbidden")


def test_one_user_cannot_see_or_revoke_another_users_keys(
    alice_client: Client, mallory, mallory_key: str
) -> None:
    theirs = ApiKey.objects.get(user=mallory)
    listing = alice_client.get("/account/keys/").content.decode()
    assert theirs.prefix not in listing and "mine" not in listing

    response = alice_client.post(f"/account/keys/{theirs.pk}/revoke/")
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_key_pages_require_sign_in() -> None:
    response = Client().get("/account/keys/")
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/account/login/")


def test_revoking_needs_post_and_csrf(alice, alice_key) -> None:
    key = ApiKey.objects.get(user=alice)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.get(f"/account/keys/{key.pk}/revoke/").status_code == 405
    assert client.post(f"/account/keys/{key.pk}/revoke/").status_code == 403
    key.refresh_from_db()
    assert key.revoked_at is None
