"""Sign-in is rate-limited per username and per client address (counters in the real Redis)."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db
PASSWORD = "a long enough password"


@pytest.fixture
def victim(db, settings) -> User:
    """A fresh username per test: the counters outlive a test in the shared Redis."""
    settings.SIGNIN_MAX_FAILURES_PER_USERNAME = 3
    settings.SIGNIN_MAX_FAILURES_PER_ADDRESS = 6
    return User.objects.create_user(f"victim-{uuid.uuid4().hex[:8]}", "v@example.org", PASSWORD)


def _sign_in(client: Client, username: str, password: str):
    return client.post("/account/login/", {"username": username, "password": password})


def test_a_username_is_locked_after_repeated_failures_even_for_the_right_password(
    victim, unique_address
) -> None:
    client = Client(REMOTE_ADDR=unique_address)
    for _ in range(3):
        assert _sign_in(client, victim.username, "wrong").status_code == 200
    locked = _sign_in(client, victim.username, PASSWORD)
    assert locked.status_code == 429
    assert 800 < int(locked.headers["Retry-After"]) <= 900
    text = locked.content.decode()
    assert "Too many failed sign-in attempts" in text and "Try again in 15 minutes" in text
    assert 'name="username"' in text  # still the sign-in page, not a bare error
    assert "_auth_user_id" not in client.session
    # From another address too: the lock is on the account, and the case does not dodge it.
    elsewhere = Client(REMOTE_ADDR="198.51.100.9")
    assert _sign_in(elsewhere, victim.username.upper(), PASSWORD).status_code == 429


def test_one_address_cannot_spray_many_usernames(victim, unique_address) -> None:
    client = Client(REMOTE_ADDR=unique_address)
    for n in range(6):
        assert _sign_in(client, f"nobody-{uuid.uuid4().hex}-{n}", "guess").status_code == 200
    assert _sign_in(client, victim.username, PASSWORD).status_code == 429
    # Another address signs the victim in normally.
    other = Client(REMOTE_ADDR="198.51.100.10")
    assert _sign_in(other, victim.username, PASSWORD).status_code == 302


def test_a_forged_forwarded_for_header_does_not_reset_the_address_count(
    victim, unique_address
) -> None:
    client = Client(REMOTE_ADDR=unique_address)
    for n in range(6):
        forged = {"HTTP_X_FORWARDED_FOR": f"203.0.113.{n}"}
        # Usernames of their own: a name locked by an earlier run would not count here.
        username = f"x{n}-{uuid.uuid4().hex[:8]}"
        client.post("/account/login/", {"username": username, "password": "guess"}, **forged)
    assert _sign_in(client, victim.username, PASSWORD).status_code == 429


def test_success_clears_the_username_count(victim, unique_address) -> None:
    client = Client(REMOTE_ADDR=unique_address)
    for _ in range(2):
        _sign_in(client, victim.username, "wrong")
    assert _sign_in(client, victim.username, PASSWORD).status_code == 302
    client.logout()
    for _ in range(2):
        assert _sign_in(client, victim.username, "wrong").status_code == 200
    assert _sign_in(client, victim.username, PASSWORD).status_code == 302


def test_the_api_throttles_ignore_a_forged_forwarded_for(throttle_rates, unique_address) -> None:
    """DRF trusts X-Forwarded-For only from NUM_PROXIES proxies (0 here): rotating it is no use."""
    throttle_rates["anon"] = "2/minute"
    client = Client(REMOTE_ADDR=unique_address)
    codes = [
        client.get("/api/v1/hardware", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}").status_code
        for n in range(3)
    ]
    assert codes == [200, 200, 429]


@pytest.fixture
def separate_caches(settings) -> None:
    """As in production: pages in one cache (which may evict), counters in another."""
    memory = "django.core.cache.backends.locmem.LocMemCache"
    settings.CACHES = {
        "default": {"BACKEND": memory, "LOCATION": "pages"},
        "limits": {"BACKEND": memory, "LOCATION": "limits"},
    }


def test_evicting_the_page_cache_resets_no_lockout_and_no_throttle(
    separate_caches, victim, unique_address, throttle_rates
) -> None:
    from django.core.cache import caches

    client = Client(REMOTE_ADDR=unique_address)
    for _ in range(3):
        _sign_in(client, victim.username, "wrong")
    throttle_rates["anon"] = "2/minute"
    assert [client.get("/api/v1/hardware").status_code for _ in range(3)] == [200, 200, 429]
    caches["default"].clear()  # a flood of cached pages pushed everything else out
    assert _sign_in(client, victim.username, PASSWORD).status_code == 429
    assert client.get("/api/v1/hardware").status_code == 429
