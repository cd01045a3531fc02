"""Sign-in brute-force limit: failed attempts are counted per username and per client address.

A fixed window starts at the first failure. Reaching the limit locks that username (or address)
for the lockout period, correct password or not, so guessing cannot continue at any speed.
Counters live in the "limits" cache (Redis in production), so every web worker shares them and
no flood of cached pages can evict them.
"""

from __future__ import annotations

import hashlib
import math
import time

from django.conf import settings
from django.http import HttpRequest

from core.formlimits import client_address
from core.throttling import count_in_window, limits_cache


def _scopes(request: HttpRequest, username: str) -> list[tuple[str, int]]:
    # Hash the username: it is attacker-chosen text and must not become a raw cache key.
    name = hashlib.sha256(username.strip().lower().encode()).hexdigest()
    address = hashlib.sha256(client_address(request).encode()).hexdigest()
    return [
        (f"signin:user:{name}", settings.SIGNIN_MAX_FAILURES_PER_USERNAME),
        (f"signin:addr:{address}", settings.SIGNIN_MAX_FAILURES_PER_ADDRESS),
    ]


def seconds_locked(request: HttpRequest, username: str) -> int:
    """How long this username or address stays locked out; 0 when sign-in may proceed."""
    locks = limits_cache().get_many([f"{key}:lock" for key, _ in _scopes(request, username)])
    remaining = max(locks.values(), default=0) - time.time()
    return math.ceil(remaining) if remaining > 0 else 0


def record_failure(request: HttpRequest, username: str) -> None:
    window = settings.SIGNIN_LOCKOUT_SECONDS
    for key, limit in _scopes(request, username):
        if count_in_window(key, window) >= limit:
            limits_cache().set(f"{key}:lock", time.time() + window, timeout=window)


def record_success(request: HttpRequest, username: str) -> None:
    """Forget the username's failures; the address counter stays, so an attacker cannot reset
    it by signing in to an account of their own between guesses."""
    key, _limit = _scopes(request, username)[0]
    limits_cache().delete(key)
