"""Django's Redis cache, keeping one redis-py client per connection pool.

Django builds a new `redis.Redis` for every cache call, and redis-py's constructor rebuilds its
table of response callbacks each time: about 0.5 ms of CPU per call here, on every page (the
cached leaderboard fragments), every throttled API request and every upload. A client over a
pool is safe to reuse; the pool itself is what Django already keeps.
"""

from __future__ import annotations

from django.core.cache.backends.redis import RedisCache, RedisCacheClient


class _ReusedClients(RedisCacheClient):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class ReusingRedisCache(RedisCache):
    def __init__(self, server, params) -> None:
        super().__init__(server, params)
        self._class = _ReusedClients
