"""The device-authorisation flow behind `benchloop login`, end to end over HTTP."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from submissions.models import ApiKey, DeviceAuthorization
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db


def _start(client: Client) -> dict:
    response = post_json(client, "/api/v1/device/start", {"client_name": "benchloop-cli"})
    assert response.status_code == 200
    return response.json()


def _age_last_poll(seconds: int = 60) -> None:
    DeviceAuthorization.objects.update(last_polled_at=timezone.now() - timedelta(seconds=seconds))


def test_the_full_device_login_flow(alice_client: Client, alice, smoke_run: dict) -> None:
    cli = Client()
    started = _start(cli)
    assert set(started) == {
        "device_code",
        "user_code",
        "verification_uri",
        "verification_uri_complete",
        "expires_in",
        "interval",
    }
    assert started["expires_in"] == 600 and started["interval"] == 5
    assert started["verification_uri"].endswith("/device/")
    assert len(started["user_code"]) == 9 and started["user_code"][4] == "-"
    # Only a hash of the device code is stored.
    assert not DeviceAuthorization.objects.filter(device_code_hash=started["device_code"]).exists()

    # A JSON poll (the CLI's) gets RFC 8628's answers: 400 with the error code.
    pending = post_json(cli, "/api/v1/device/token", {"device_code": started["device_code"]})
    assert pending.status_code == 400
    assert pending.json()["error"] == "authorization_pending"

    too_fast = post_json(cli, "/api/v1/device/token", {"device_code": started["device_code"]})
    assert too_fast.status_code == 400
    assert too_fast.json()["error"] == "slow_down"
    assert too_fast.headers["Retry-After"] == "10"
    assert DeviceAuthorization.objects.get().interval == 10  # the client must slow down
    again = post_json(cli, "/api/v1/device/token", {"device_code": started["device_code"]})
    assert again.json()["error"] == "slow_down"
    assert again.headers["Retry-After"] == "15"  # the header follows the grown interval

    page = alice_client.get(started["verification_uri_complete"].split("testserver")[-1])
    assert started["user_code"] in page.content.decode()
    approve = alice_client.post("/device/", {"code": started["user_code"].lower().replace("-", "")})
    assert "Approved" in approve.content.decode()

    _age_last_poll()
    granted = post_json(cli, "/api/v1/device/token", {"device_code": started["device_code"]})
    assert granted.status_code == 200
    key = granted.json()["access_token"]
    assert key.startswith("bl_") and granted.json()["api_key"] == key
    assert ApiKey.objects.get(user=alice).scopes == ["read", "submit"]
    assert post_json(cli, "/api/v1/runs", smoke_run, key).status_code == 201

    _age_last_poll()
    reused = post_json(cli, "/api/v1/device/token", {"device_code": started["device_code"]})
    assert reused.status_code == 400
    assert reused.json()["error"] == "invalid_grant"
    assert ApiKey.objects.filter(user=alice).count() == 1


def test_an_expired_code_cannot_be_approved_or_redeemed(alice_client: Client) -> None:
    cli = Client()
    started = _start(cli)
    DeviceAuthorization.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    approve = alice_client.post("/device/", {"code": started["user_code"]})
    assert "has expired" in approve.content.decode()
    response = post_json(cli, "/api/v1/device/token", {"device_code": started["device_code"]})
    assert response.status_code == 400
    assert response.json()["error"] == "expired_token"
    assert ApiKey.objects.count() == 0


def test_an_unknown_device_code_is_refused() -> None:
    response = post_json(Client(), "/api/v1/device/token", {"device_code": "made-up"})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    for body in ({}, {"device_code": ""}, {"device_code": 7}):
        missing = post_json(Client(), "/api/v1/device/token", body)
        assert missing.status_code == 400
        assert missing.json() == {
            "error": "invalid_request",
            "error_description": "device_code is required.",
        }


def test_approving_needs_a_signed_in_user() -> None:
    response = Client().post("/device/", {"code": "ABCD-EFGH"})
    assert response.status_code == 302
    assert "/account/login/" in response.headers["Location"]


def test_a_code_is_approved_once(alice_client: Client, mallory) -> None:
    started = _start(Client())
    alice_client.post("/device/", {"code": started["user_code"]})
    other = Client()
    other.force_login(mallory)
    second = other.post("/device/", {"code": started["user_code"]})
    assert "No pending login has this code" in second.content.decode()
    assert DeviceAuthorization.objects.get().user.username == "alice"


def test_starting_is_rate_limited(throttle_rates: dict, unique_address: str) -> None:
    throttle_rates["device"] = "2/hour"
    client = Client(REMOTE_ADDR=unique_address)
    assert post_json(client, "/api/v1/device/start", {}).status_code == 200
    assert post_json(client, "/api/v1/device/start", {}).status_code == 200
    third = post_json(client, "/api/v1/device/start", {})
    assert third.status_code == 429
    assert third.json()["error"]["code"] == "throttled"
    assert int(third.headers["Retry-After"]) > 0
