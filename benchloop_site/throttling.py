"""DRF throttles whose counters live in the "limits" cache, which never evicts them: a flood of
cached pages in the default cache must not reset anyone's rate limit."""

from __future__ import annotations

from django.core.cache import BaseCache, caches
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


class LimitsCache:
    @property
    def cache(self) -> BaseCache:
        # Looked up per use, not bound at import, so settings changes (tests) take effect.
        return caches["limits"]


class AnonThrottle(LimitsCache, AnonRateThrottle):
    pass


class UserThrottle(LimitsCache, UserRateThrottle):
    pass
