"""Every form that writes or sends mail, and the device-token endpoint, has a price: 429."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from lab.models import BenchmarkJob
from submissions.models import ApiKey, DeviceAuthorization, RunReport
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db


def _signup_body() -> dict:
    name = f"u{uuid.uuid4().hex[:10]}"
    password = "a long enough passphrase 42"
    return {
        "username": name,
        "email": f"{name}@example.org",
        "password1": password,
        "password2": password,
    }


def _check_refusal(response, limit_seconds: int) -> None:
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= limit_seconds
    assert "Too many requests" in response.content.decode()


def test_sign_up_is_limited_per_address(form_rates, unique_address) -> None:
    form_rates["signup"] = "2/hour"
    client = Client(REMOTE_ADDR=unique_address)
    codes = [client.post("/account/signup/", _signup_body()).status_code for _ in range(3)]
    assert codes == [302, 302, 429]
    _check_refusal(client.post("/account/signup/", _signup_body()), 3600)
    other = unique_address.rsplit(".", 1)[0] + (".2" if unique_address.endswith(".1") else ".1")
    assert Client(REMOTE_ADDR=other).post("/account/signup/", _signup_body()).status_code == 302


def test_mail_to_one_address_is_limited_whoever_asks(form_rates, unique_address, alice) -> None:
    form_rates["mail_to_address"] = "1/hour"
    email = f"target-{uuid.uuid4().hex[:8]}@example.org"
    first = Client(REMOTE_ADDR=unique_address).post(
        "/account/signup/", {**_signup_body(), "email": email}
    )
    again = Client(REMOTE_ADDR="198.51.100.9").post("/account/password-reset/", {"email": email})
    assert first.status_code == 302
    _check_refusal(again, 3600)


def test_password_reset_is_limited_per_address(form_rates, unique_address) -> None:
    form_rates["password_reset"] = "1/hour"
    client = Client(REMOTE_ADDR=unique_address)
    assert client.post("/account/password-reset/", {"email": "a@example.org"}).status_code == 302
    _check_refusal(client.post("/account/password-reset/", {"email": "b@example.org"}), 3600)


def test_key_creation_is_limited_per_account(form_rates, alice_client, alice) -> None:
    form_rates["api_key"] = "2/hour"
    before = ApiKey.objects.filter(user=alice).count()
    body = {"name": "k", "scopes": ["read"]}
    codes = [alice_client.post("/account/keys/", body).status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    assert ApiKey.objects.filter(user=alice).count() == before + 2


def test_device_approval_is_limited_per_account(form_rates, alice_client) -> None:
    form_rates["device_approve"] = "2/hour"
    codes = [alice_client.post("/device/", {"code": "ABCD-EFGH"}).status_code for _ in range(3)]
    assert codes == [200, 200, 429]


def test_reports_are_limited_per_account(form_rates, mallory) -> None:
    form_rates["report"] = "1/day"
    client = Client()
    client.force_login(mallory)
    client.post("/runs/1/report/", {"reason": "x"})  # counts even when the run is not found
    _check_refusal(client.post("/runs/1/report/", {"reason": "x"}), 86400)
    assert not RunReport.objects.exists()


def test_lab_job_creation_is_limited_per_operator(form_rates, operator) -> None:
    form_rates["lab_job"] = "1/hour"
    client = Client()
    client.force_login(operator)
    body = {"endpoint_url": "http://10.0.0.1:8080/v1", "model": "m", "pool": "cpu"}
    client.post("/lab/jobs/new/", body)
    _check_refusal(client.post("/lab/jobs/new/", body), 3600)
    assert BenchmarkJob.objects.count() <= 1


def test_a_json_client_gets_the_api_error_shape(form_rates, unique_address) -> None:
    form_rates["signup"] = "1/hour"
    client = Client(REMOTE_ADDR=unique_address)
    client.post("/account/signup/", _signup_body())
    refused = client.post(
        "/account/signup/", _signup_body(), headers={"Accept": "application/json"}
    )
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert refused.json()["error"]["code"] == "throttled"


def test_the_device_token_endpoint_is_throttled(throttle_rates, unique_address) -> None:
    throttle_rates["device_token"] = "2/hour"
    client = Client(REMOTE_ADDR=unique_address)
    codes = [
        post_json(client, "/api/v1/device/token", {"device_code": "guess"}).status_code
        for _ in range(3)
    ]
    assert codes == [400, 400, 429]
    refused = post_json(client, "/api/v1/device/token", {"device_code": "guess"})
    assert refused.json()["error"]["code"] == "throttled"
    assert 0 < int(refused["Retry-After"]) <= 3600
    assert not DeviceAuthorization.objects.exists()
