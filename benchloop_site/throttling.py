"""DRF throttles that count with one atomic increment per request, in the "limits" cache.

DRF's own throttles keep a list of every request time in the window: each request reads the
list, appends to it and writes it back. Two workers that read the same list both admit their
request and one write is lost, so parallel clients get past the limit, and at high rates the
list itself (tens of thousands of floats, pickled both ways) becomes the cost of a request.
These count per fixed window instead: `add` starts a window, `incr` is atomic in Redis, so
exactly `num_requests` requests per window get through however many arrive at once.

The counters live in the "limits" cache, which never evicts them: a flood of cached pages in
the default cache must not reset anyone's rate limit.
"""

from __future__ import annotations

import math

from django.core.cache import BaseCache, caches
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle


def limits_cache() -> BaseCache:
    # Looked up per use, not bound at import, so settings changes (tests) take effect.
    return caches["limits"]


def count_in_window(key: str, seconds: int) -> int:
    """This event's number among those counted under `key` since its window began; a window
    starts with the first event and lasts `seconds`. Atomic across workers (Redis INCR)."""
    counters = limits_cache()
    counters.add(key, 0, timeout=seconds)
    try:
        return counters.incr(key)
    except ValueError:  # expired or evicted between add and incr: this event starts a window
        counters.set(key, 1, timeout=seconds)
        return 1


class CountingThrottle(SimpleRateThrottle):
    retry_after = 0.0

    @property
    def cache(self) -> BaseCache:
        return limits_cache()

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        now = self.timer()
        window = math.floor(now / self.duration)
        # The counter outlives its window by a little, so a late incr never finds it gone.
        if count_in_window(f"{key}:{window}", self.duration + 5) > self.num_requests:
            self.retry_after = (window + 1) * self.duration - now
            return False
        return True

    def wait(self) -> float:
        return max(self.retry_after, 0.0)


class AnonThrottle(CountingThrottle, AnonRateThrottle):
    pass


class UserThrottle(CountingThrottle, UserRateThrottle):
    pass
