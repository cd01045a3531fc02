"""Pages a view computes are limited per client address, as the API's reads are (issue 31,
defect 11): a flood of uncached variants of /leaderboard/?q=… gets the site's 429 page once
the address's budget is spent, while what the shared page cache answers costs nothing."""

from __future__ import annotations

import pytest
from django.test import Client

from leaderboard.tests.factories import add_runs, record

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def board() -> None:
    add_runs(record(model_id="llama3.1:8b"), record(model_id="qwen3:14b", gpu="NVIDIA A100"))


@pytest.fixture
def five_a_minute(form_rates: dict) -> dict:
    form_rates["page_render"] = "5/minute"
    return form_rates


def test_uncached_variants_are_refused_with_the_429_page_past_the_rate(
    five_a_minute, unique_address
) -> None:
    visitor = Client(REMOTE_ADDR=unique_address)
    codes = [visitor.get(f"/leaderboard/?q=variant-{n}").status_code for n in range(8)]
    assert codes == [200] * 5 + [429] * 3
    refused = visitor.get("/leaderboard/?q=one-more")
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 60
    page = refused.content.decode()
    assert "<h1>Too many requests</h1>" in page and "Pages are limited per visitor" in page
    # Another address has its own budget; the API keeps its own throttles.
    assert Client(REMOTE_ADDR="10.255.0.1").get("/leaderboard/?q=variant-0").status_code == 200
    assert visitor.get("/api/v1/leaderboard?q=variant-9").status_code == 200
    # A client that asks for JSON gets the API's error shape.
    asked = visitor.get("/leaderboard/?q=x", HTTP_ACCEPT="application/json")
    assert asked.status_code == 429 and asked.json()["error"]["code"] == "throttled"


def test_pages_from_the_shared_cache_do_not_count(five_a_minute, unique_address) -> None:
    visitor = Client(REMOTE_ADDR=unique_address)
    warm = Client(REMOTE_ADDR="10.255.0.2")  # another visitor renders them once
    for path in ("/leaderboard/", "/", "/leaderboard/?q=llama"):
        assert warm.get(path).status_code == 200
    for _ in range(10):
        for path in ("/leaderboard/", "/", "/leaderboard/?q=llama"):
            assert visitor.get(path).status_code == 200, path
    # The whole budget is still there for pages the cache does not hold.
    codes = [visitor.get(f"/leaderboard/?q=variant-{n}").status_code for n in range(6)]
    assert codes == [200] * 5 + [429]


def test_other_pages_count_too_and_signed_in_visitors_count_per_account(
    five_a_minute, alice, unique_address
) -> None:
    visitor = Client(REMOTE_ADDR=unique_address)
    paths = ["/compare/?a=1", "/models/llama3.1:8b/", "/runs/999999/", "/methodology/", "/x/"]
    assert [visitor.get(p).status_code < 429 for p in paths] == [True] * 5
    assert visitor.get("/leaderboard/?q=sixth").status_code == 429
    signed_in = Client(REMOTE_ADDR=unique_address)
    signed_in.force_login(alice)
    codes = [signed_in.get(f"/leaderboard/?q=mine-{n}").status_code for n in range(6)]
    assert codes == [200] * 5 + [429]
