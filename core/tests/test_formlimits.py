"""core.formlimits on the real limits cache: a form's posts count per client address when
signed out (through the trusted proxies only), per `about` when given, and can be taken back."""

from __future__ import annotations

import pytest

from core.formlimits import client_address, seconds_to_wait, uncount


@pytest.fixture
def one_a_day(form_rates) -> str:
    # A day's window: the count cannot restart between two posts of one test.
    form_rates["signup"] = "1/day"
    return "signup"


def _post(rf, address: str, forwarded_for: str = ""):
    extra = {"HTTP_X_FORWARDED_FOR": forwarded_for} if forwarded_for else {}
    return rf.post("/account/signup/", REMOTE_ADDR=address, **extra)


def test_the_second_post_from_one_address_waits_until_the_window_ends(
    rf, one_a_day, unique_address
) -> None:
    assert seconds_to_wait(_post(rf, unique_address), one_a_day) == 0
    wait = seconds_to_wait(_post(rf, unique_address), one_a_day)
    assert 0 < wait <= 86400
    other = unique_address.rsplit(".", 1)[0] + ".255"
    assert seconds_to_wait(_post(rf, other), one_a_day) == 0


def test_a_forged_forwarded_for_is_not_a_new_client_without_a_proxy(
    rf, one_a_day, unique_address
) -> None:
    assert seconds_to_wait(_post(rf, unique_address, "192.0.2.1"), one_a_day) == 0
    assert seconds_to_wait(_post(rf, unique_address, "192.0.2.2"), one_a_day) > 0


def test_behind_one_proxy_each_forwarded_client_counts_apart(
    rf, settings, one_a_day, unique_address
) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    proxy = "10.0.0.2"
    first = unique_address
    second = unique_address.rsplit(".", 1)[0] + ".255"
    assert client_address(_post(rf, proxy, first)) == first
    assert seconds_to_wait(_post(rf, proxy, first), one_a_day) == 0
    assert seconds_to_wait(_post(rf, proxy, second), one_a_day) == 0
    assert seconds_to_wait(_post(rf, proxy, first), one_a_day) > 0


def test_about_counts_per_subject_whoever_asks(rf, form_rates, unique_address) -> None:
    form_rates["mail_to_address"] = "1/day"
    subject = f"victim-{unique_address}@example.org"
    assert seconds_to_wait(_post(rf, unique_address), "mail_to_address", about=subject) == 0
    elsewhere = unique_address.rsplit(".", 1)[0] + ".254"
    # Case and spaces do not make a new subject.
    again = seconds_to_wait(_post(rf, elsewhere), "mail_to_address", about=subject.upper() + " ")
    assert again > 0


def test_uncount_takes_a_post_back(rf, one_a_day, unique_address) -> None:
    assert seconds_to_wait(_post(rf, unique_address), one_a_day) == 0
    uncount(_post(rf, unique_address), one_a_day)
    assert seconds_to_wait(_post(rf, unique_address), one_a_day) == 0
    assert seconds_to_wait(_post(rf, unique_address), one_a_day) > 0


def test_a_scope_without_a_rate_never_waits(rf, form_rates, unique_address) -> None:
    form_rates["signup"] = ""
    for _ in range(3):
        assert seconds_to_wait(_post(rf, unique_address), "signup") == 0
