"""core.pagecache on the real cache (Redis in the tests): a value is computed once per page
version, a bump makes every entry stale, and a cache that is down only costs the recompute."""

from __future__ import annotations

import uuid

from core import pagecache


def _counting(value: str) -> tuple[list[str], object]:
    calls: list[str] = []

    def compute() -> str:
        calls.append(value)
        return value

    return calls, compute


def test_a_value_is_computed_once_per_version() -> None:
    parts = uuid.uuid4().hex  # no earlier run's entry
    calls, compute = _counting("board")
    assert pagecache.cached("test-fragment", parts, compute) == "board"
    assert pagecache.cached("test-fragment", parts, compute) == "board"
    assert calls == ["board"]
    pagecache.bump()
    assert pagecache.cached("test-fragment", parts, compute) == "board"
    assert calls == ["board", "board"]


def test_each_name_and_parts_is_its_own_entry() -> None:
    parts = uuid.uuid4().hex
    first_calls, first = _counting("first")
    second_calls, second = _counting("second")
    found = pagecache.cached_many({"a": (parts, first), "b": (parts, second)})
    assert found == {"a": "first", "b": "second"}
    assert pagecache.cached_many({"a": (parts, first)}) == {"a": "first"}
    assert pagecache.cached("a", parts + "-other", second) == "second"
    assert (first_calls, second_calls) == (["first"], ["second", "second"])


def test_a_bump_moves_the_version_and_its_time_on() -> None:
    before = pagecache.data_version()
    pagecache.bump()
    after = pagecache.data_version()
    assert before is not None and after is not None
    assert after[0] != before[0] and after[1] >= before[1]


def test_an_unreachable_cache_computes_every_time(settings, caplog) -> None:
    settings.CACHES = {
        **settings.CACHES,
        # Nothing listens on port 1: every cache call fails at once.
        "default": {"BACKEND": "core.cache.ReusingRedisCache", "LOCATION": "redis://127.0.0.1:1/0"},
    }
    calls, compute = _counting("page")
    assert pagecache.cached("test-fragment", "down", compute) == "page"
    assert pagecache.cached("test-fragment", "down", compute) == "page"
    assert calls == ["page", "page"]
    assert pagecache.data_version() is None  # no version can be known, so no ETag
    assert "leaderboard cache unreachable" in caplog.text
