"""Django's Redis cache, keeping one redis-py client per connection pool.

Django builds a new `redis.Redis` for every cache call, and redis-py's constructor rebuilds its
table of response callbacks each time: about 0.5 ms of CPU per call here, on every page (the
cached leaderboard fragments), every throttled API request and every upload. A client over a
pool is safe to reuse; the pool itself is what Django already keeps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from redis.client import Redis
from redis.connection import ConnectionPool


class _ReusedClients(RedisCacheClient):
    # Django's private members used here, which django-stubs leave out of RedisCacheClient.
    _client: Callable[..., Redis]
    _get_connection_pool: Callable[[bool], ConnectionPool]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Redis] = {}

    def get_client(
        self, key: str | bytes | memoryview | None = None, *, write: bool = False
    ) -> Redis:
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class ReusingRedisCache(RedisCache):
    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _ReusedClients
