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


class CountingThrottle(SimpleRateThrottle):
    retry_after = 0.0

    @property
    def cache(self) -> BaseCache:
        # Looked up per use, not bound at import, so settings changes (tests) take effect.
        return caches["limits"]

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        now = self.timer()
        window = math.floor(now / self.duration)
        counter = f"{key}:{window}"
        # The counter outlives its window by a little, so a late incr never finds it gone.
        self.cache.add(counter, 0, timeout=self.duration + 5)
        try:
            count = self.cache.incr(counter)
        except ValueError:  # evicted or expired between add and incr
            self.cache.set(counter, 1, timeout=self.duration + 5)
            count = 1
        if count > self.num_requests:
            self.retry_after = (window + 1) * self.duration - now
            return False
        return True

    def wait(self) -> float:
        return max(self.retry_after, 0.0)


class AnonThrottle(CountingThrottle, AnonRateThrottle):
    pass


class UserThrottle(CountingThrottle, UserRateThrottle):
    pass
