"""Rate limits hold under parallel requests (counters in the real Redis "limits" cache)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import Client

from core.throttling import AnonThrottle

pytestmark = pytest.mark.django_db
PARALLEL = 40


def test_parallel_requests_get_exactly_the_limit_through(rf, throttle_rates, unique_address):
    # A day's window, so the test never straddles two windows.
    throttle_rates["anon"] = "10/day"
    barrier = threading.Barrier(PARALLEL)

    def attempt(_n: int) -> bool:
        request = rf.get("/api/v1/hardware", REMOTE_ADDR=unique_address)
        request.user = AnonymousUser()
        throttle = AnonThrottle()
        barrier.wait()  # all at once, as parallel workers would
        return throttle.allow_request(request, None)

    with ThreadPoolExecutor(PARALLEL) as pool:
        admitted = list(pool.map(attempt, range(PARALLEL)))
    assert admitted.count(True) == 10


def test_a_throttled_answer_says_when_to_come_back(throttle_rates, unique_address) -> None:
    throttle_rates["anon"] = "2/hour"
    client = Client(REMOTE_ADDR=unique_address)
    codes = [client.get("/api/v1/hardware").status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    refused = client.get("/api/v1/hardware")
    assert 0 < int(refused["Retry-After"]) <= 3600
    assert refused.json()["error"]["code"] == "throttled"
    # Another address has its own count.
    other = unique_address.rsplit(".", 1)[0] + (".1" if not unique_address.endswith(".1") else ".2")
    assert Client(REMOTE_ADDR=other).get("/api/v1/hardware").status_code == 200
