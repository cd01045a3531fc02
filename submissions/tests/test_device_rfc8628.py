"""RFC 8628 on the wire (issue 31, defect 12): a standard device-flow client, written here with
a plain HTTP client and nothing of our CLI, logs in against the running site. It polls
form-encoded with the device_code grant type, reads authorization_pending and slow_down as
400 errors, is told access_denied when the user denies, and gets a bearer token when the
user approves; the user approves and denies on /device/, as a browser does."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from django.test import Client
from django.utils import timezone

from submissions.models import ApiKey, DeviceAuthorization

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
FORM = "application/x-www-form-urlencoded"


class DeviceClient:
    """What RFC 8628 asks of a device: a form-encoded authorization request, then form-encoded
    token requests, each answer read as RFC 6749 section 5 describes it."""

    def __init__(self, base: str) -> None:
        self.http = httpx.Client(base_url=base, timeout=10)

    def authorize(self) -> dict:
        answer = self.http.post("/api/v1/device/start", data={"client_id": "rfc8628-client"})
        assert answer.status_code == 200, answer.text
        return answer.json()

    def token(self, device_code: str) -> httpx.Response:
        answer = self.http.post(
            "/api/v1/device/token", data={"grant_type": GRANT_TYPE, "device_code": device_code}
        )
        assert answer.request.headers["Content-Type"] == FORM
        assert answer.headers["Content-Type"].startswith("application/json")
        assert answer.headers["Cache-Control"] == "no-store"
        return answer

    def error(self, device_code: str) -> str:
        answer = self.token(device_code)
        assert answer.status_code == 400, answer.text
        body = answer.json()
        assert isinstance(body["error_description"], str)
        return body["error"]


@pytest.fixture
def device(live_server) -> Iterator[DeviceClient]:
    client = DeviceClient(live_server.url)
    yield client
    client.http.close()


def _interval_passes() -> None:
    """The device waits its interval: the site's record of the last poll is moved back."""
    DeviceAuthorization.objects.update(last_polled_at=timezone.now() - timedelta(seconds=60))


@pytest.mark.django_db(transaction=True)
def test_a_standard_device_client_logs_in_with_pending_slow_down_deny_and_approve(
    device: DeviceClient, alice, alice_client: Client
) -> None:
    first = device.authorize()
    assert first["interval"] == 5 and first["expires_in"] == 600
    # Pending, then too fast: slow_down, and the interval the device must keep grows by 5 s.
    assert device.error(first["device_code"]) == "authorization_pending"
    assert device.error(first["device_code"]) == "slow_down"
    assert DeviceAuthorization.objects.get().interval == 10
    _interval_passes()
    assert device.error(first["device_code"]) == "authorization_pending"

    # The user denies this one on the device page: the device is told, and gets no token.
    page = alice_client.get(f"/device/?code={first['user_code']}").content.decode()
    assert 'value="approve"' in page and 'value="deny"' in page
    denied = alice_client.post("/device/", {"code": first["user_code"], "decision": "deny"})
    assert "Denied." in denied.content.decode()
    _interval_passes()
    assert device.error(first["device_code"]) == "access_denied"
    _interval_passes()
    assert device.error(first["device_code"]) == "access_denied"  # for good

    # A second login, which the user approves: the device gets a bearer token once.
    second = device.authorize()
    assert device.error(second["device_code"]) == "authorization_pending"
    approved = alice_client.post("/device/", {"code": second["user_code"], "decision": "approve"})
    assert "Approved." in approved.content.decode()
    _interval_passes()
    granted = device.token(second["device_code"])
    assert granted.status_code == 200, granted.text
    token = granted.json()
    assert token["token_type"] == "Bearer" and token["access_token"].startswith("bl_")
    assert set(token["scope"].split()) == {"read", "submit"}
    assert ApiKey.objects.get().user == alice
    _interval_passes()
    assert device.error(second["device_code"]) == "invalid_grant"  # used once

    # The token is a bearer token for the API: alice's run state is hers to read.
    state = device.http.get(
        "/api/v1/runs/999999/state", headers={"Authorization": f"Bearer {token['access_token']}"}
    )
    assert state.status_code == 404  # (authenticated: a bad token would be a 401)
    wrong = device.http.get("/api/v1/runs/999999/state", headers={"Authorization": "Bearer bl_x"})
    assert wrong.status_code == 401


@pytest.mark.django_db(transaction=True)
def test_a_standard_device_client_is_told_expired_and_wrong_grants(device: DeviceClient) -> None:
    started = device.authorize()
    DeviceAuthorization.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert device.error(started["device_code"]) == "expired_token"
    other = device.http.post(
        "/api/v1/device/token",
        data={"grant_type": "authorization_code", "device_code": started["device_code"]},
    )
    assert other.status_code == 400 and other.json()["error"] == "unsupported_grant_type"
    for fields in ({"grant_type": GRANT_TYPE}, {"grant_type": GRANT_TYPE, "device_code": ""}):
        missing = device.http.post("/api/v1/device/token", data=fields)
        assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"
