"""The Redis cache keeps one client per pool and still behaves as Django's cache."""

from __future__ import annotations

import uuid

from django.core.cache import cache, caches

from core.cache import ReusingRedisCache


def test_the_site_cache_reuses_its_redis_client() -> None:
    site_cache = caches["default"]
    assert isinstance(site_cache, ReusingRedisCache)
    backend = site_cache._cache
    assert backend.get_client(write=True) is backend.get_client(write=True)
    assert backend.get_client() is backend.get_client("any key")


def test_it_still_stores_counts_and_expires() -> None:
    key = f"test-cache-{uuid.uuid4().hex}"
    assert cache.add(key, 1, timeout=30)
    assert not cache.add(key, 2, timeout=30)
    assert cache.incr(key) == 2
    cache.set_many({f"{key}:a": {"x": [1, 2]}, f"{key}:b": "text"}, timeout=30)
    assert cache.get_many([f"{key}:a", f"{key}:b", f"{key}:c"]) == {
        f"{key}:a": {"x": [1, 2]},
        f"{key}:b": "text",
    }
    cache.delete_many([key, f"{key}:a", f"{key}:b"])
    assert cache.get(key) is None
