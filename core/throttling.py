"""DRF throttles that count with one atomic increment per request, in the "limits" cache.

DRF's own throttles keep a list of every request time in the window: each request reads the
list, appends to it and writes it back. Two workers that read the same list both admit their
request and one write is lost, so parallel clients get past the limit, and at high rates the
list itself (tens of thousands of floats, pickled both ways) becomes the cost of a request.
These count per fixed window instead: `add` starts a window, `incr` is atomic in Redis, so
exactly `num_requests` requests per window get through however many arrive at once.

The counters live in the "limits" cache, which never evicts them: a flood of cached pages in
the default cache must not reset anyone's rate limit.

When a counter cannot be read or written (Redis down, or the file cache of the embedded
default on a full disk), the throttles fail open: the request goes on, unthrottled, and a
warning is logged. A throttle bounds what one client costs the site; it guards no data, and
the request meets every other check as usual (a write on a full disk still fails, with its
507). Failing closed would turn an outage of the counters into an outage of every API read
that needs nothing else. The sign-in lockout is the exception (submissions/signin.py): a
password guess that cannot be counted is refused, since stopping guesses is all it is for.
"""

from __future__ import annotations

import logging
import math

from django.core.cache import BaseCache, caches
from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle
from rest_framework.views import APIView

log = logging.getLogger(__name__)
# What a counter that cannot be reached raises: the file cache's OSError (ENOSPC on a full
# disk, EACCES, EROFS) and any Redis error.
COUNTER_ERRORS = (OSError, RedisError)


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
    # Set by SimpleRateThrottle.__init__ from the scope's rate (None when it has none); the
    # stubs leave them out.
    num_requests: int | None
    duration: int | None

    # The stubs make `cache` a plain attribute; it is looked up per use here (settings change).
    @property
    def cache(self) -> BaseCache:  # type: ignore[override]
        return limits_cache()

    def allow_request(self, request: Request, view: APIView) -> bool:
        limit, duration = self.num_requests, self.duration
        if limit is None or duration is None:  # the scope has no rate
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        now = self.timer()
        window = math.floor(now / duration)
        try:
            # The counter outlives its window by a little, so a late incr never finds it gone.
            count = count_in_window(f"{key}:{window}", duration + 5)
        except COUNTER_ERRORS as exc:
            log.warning("throttle %s not counted (failing open): %r", self.scope, exc)
            return True
        if count > limit:
            self.retry_after = (window + 1) * duration - now
            return False
        return True

    def wait(self) -> float:
        return max(self.retry_after, 0.0)


class AnonThrottle(CountingThrottle, AnonRateThrottle):
    pass


class UserThrottle(CountingThrottle, UserRateThrottle):
    pass
