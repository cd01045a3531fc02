"""The page version: cached fragments and pages are stored under it, and anything that
changes what the public pages show bumps it, which makes every cached entry stale at once.

Every cache key embeds the current version. Anything that changes which runs are public or
which run represents a stack (set_published, refresh_stack_stats, deleting a run) calls
`invalidate()`, so the next request misses and recomputes; old entries simply expire.
The cache is an optimisation only: when it is unreachable the pages are computed as before.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import TypeVar, cast

from django.core.cache import cache
from django.db import connection, transaction

log = logging.getLogger(__name__)
T = TypeVar("T")
K = TypeVar("K")

# Bounds staleness from changes that do not invalidate (an admin renaming a stack) and from an
# invalidation lost while the cache was down.
TIMEOUT = 120
# Content-keyed entries stay valid while their fingerprint does: kept a day, not two minutes.
CONTENT_TIMEOUT = 24 * 3600
# The newest content-keyed values, also kept in this process: their key names what they were
# computed from, so a copy here is as current as the cache's, and reading it skips the cache's
# round trip and the unpickling (a quarter of a cold board's estimates at 1,000,000 runs).
_BY_CONTENT: dict[str, object] = {}
_BY_CONTENT_KEPT = 8  # of each name: a stack's places must not push out the calibration
# Each name's newest key this process computed or read: what it falls back on when the cache
# lost its own record of the newest (a restart, an eviction from the capped cache).
_LATEST: dict[str, str] = {}
# A refresh asked for and not started in this long (its message lost) may be asked for again.
QUEUED_SECONDS = 300


def _prefix() -> str:
    # One cache may serve several databases (test workers, benchmarks); keep them apart.
    database = str(connection.settings_dict["NAME"]).encode()
    return f"leaderboard:{hashlib.sha256(database).hexdigest()[:12]}"


def current_version() -> int:
    key = f"{_prefix()}:version"
    try:
        version = cache.get(key)
        if version is None:
            # A clock-based start cannot repeat a version handed out before an eviction.
            cache.add(key, time.time_ns(), timeout=None)
            version = cache.get(key)
    except Exception:  # the cache being down must not take the pages down
        log.warning("leaderboard cache unreachable", exc_info=True)
        return 0
    return version or 0


def bump() -> None:
    """A new version now (see invalidate for use inside a transaction)."""
    key = f"{_prefix()}:version"
    try:
        try:
            cache.incr(key)
        except ValueError:  # no version yet, or it was evicted
            cache.set(key, time.time_ns(), timeout=None)
        # After the new version: a reader between the two sees an old time with a new version,
        # which only makes a conditional request fetch again.
        cache.set(f"{_prefix()}:changed", time.time(), timeout=None)
    except Exception:
        log.warning("could not invalidate the leaderboard cache", exc_info=True)


def data_version() -> tuple[int, float] | None:
    """The current version and the Unix time it was made (feeds' and exports' ETag and
    Last-Modified), or None when the cache is unreachable and neither can be known."""
    prefix = _prefix()
    keys = [f"{prefix}:version", f"{prefix}:changed"]
    try:
        found = cache.get_many(keys)
        version = found.get(keys[0]) or current_version()
        changed = found.get(keys[1])
        if changed is None:
            # Never recorded or evicted: "now" can only make clients fetch once more.
            cache.add(keys[1], time.time(), timeout=None)
            changed = cache.get(keys[1])
    except Exception:
        log.warning("leaderboard cache unreachable", exc_info=True)
        return None
    return (version, changed) if version and changed else None


def invalidate() -> None:
    """Make every cached fragment stale: now, and again once the current transaction commits.

    The second bump matters: a request that read the new version before the commit may have
    cached what it saw of the old data under it.
    """
    bump()
    transaction.on_commit(bump)


def cached(name: str, parts: str, compute: Callable[[], T]) -> T:
    """`compute()`'s value for (name, parts) at the current version, from the cache if there."""
    return cached_many({name: (parts, compute)})[name]


class NotReady(Exception):
    """No value of this name is at hand and it is not computed where it was asked for: a
    refresh has been asked for (cached_by_content's `compute_here`)."""


def cached_by_content(
    name: str,
    fingerprint: str,
    compute: Callable[[], T],
    *,
    refresh: Callable[[], None] | None = None,
    compute_here: Callable[[], bool] | None = None,
) -> T:
    """`compute()`'s value for as long as `fingerprint` (what it is computed from) is unchanged,
    whatever the page version: for derived data that costs seconds to build and outlives most
    publishes (the estimates' calibration), so a page whose cache was flushed does not pay it.

    With `refresh`, a fingerprint not computed yet is not computed here when an earlier value
    exists (in the cache, or this process's own newest): that value is returned and
    `refresh()` is called (once per QUEUED_SECONDS) to have the new one computed off the
    request, which then calls this without `refresh`. With no earlier value either and
    `compute_here()` false (asked only then), `refresh()` is asked for likewise and NotReady
    raised. The value is shared: callers must not change it."""
    return cached_by_content_keyed(
        name, fingerprint, compute, refresh=refresh, compute_here=compute_here
    )[0]


def cached_by_content_keyed(
    name: str,
    fingerprint: str,
    compute: Callable[[], T],
    *,
    refresh: Callable[[], None] | None = None,
    compute_here: Callable[[], bool] | None = None,
) -> tuple[T, str]:
    """cached_by_content's value and the key it is stored under: the fingerprint's own, or,
    while a refresh is awaited, the earlier value's (what is worked out from the value can be
    kept by it)."""
    key = _content_key(name, fingerprint)
    if key in _BY_CONTENT:
        return cast("T", _BY_CONTENT[key]), key
    latest = f"{_prefix()}:{name}:latest"  # the key of the newest value computed
    earlier: object = None
    earlier_key = ""
    wait = False  # for a refresh, with the earlier value or none
    try:
        found = cache.get(key)
        if found is None and refresh is not None:
            earlier_key = cache.get(latest) or ""
            earlier = _stored(earlier_key)
            if earlier is None:
                earlier_key = _LATEST.get(latest, "")
                earlier = _BY_CONTENT.get(earlier_key)
            wait = earlier is not None or not _here(compute_here)
            if wait and cache.add(f"{_prefix()}:{name}:queued", 1, timeout=QUEUED_SECONDS):
                _call_quietly(refresh)
    except Exception:  # the cache being down must not take the pages down
        log.warning("leaderboard cache unreachable", exc_info=True)
        found = None
        if refresh is not None and not _here(compute_here):
            # Nothing can say whether a refresh was asked for already: none is asked for.
            earlier_key = _LATEST.get(latest, "")
            earlier, wait = _BY_CONTENT.get(earlier_key), True
    if wait:
        if earlier is None:
            raise NotReady(name)
        return cast("T", earlier), earlier_key
    if found is None:
        found = compute()
        try:
            cache.set_many({key: found, latest: key}, CONTENT_TIMEOUT)
        except Exception:
            log.warning("leaderboard cache unreachable", exc_info=True)
    _keep(key, found)
    _LATEST[latest] = key
    return cast("T", found), key


def _here(compute_here: Callable[[], bool] | None) -> bool:
    return compute_here is None or compute_here()


def cached_by_content_each(
    name: str, fingerprints: dict[K, str], compute: Callable[[list[K]], dict[K, T]]
) -> dict[K, T]:
    """cached_by_content for several parts of one value at once, each kept for as long as its
    own fingerprint holds: one round trip reads them all, the missing parts are computed in
    one call of `compute(missing)`, which must give each of them a value, and one round trip
    stores those. Not kept in this process: a page may ask for dozens."""
    keys = {part: _content_key(name, fingerprint) for part, fingerprint in fingerprints.items()}
    try:
        found = cache.get_many(list(keys.values()))
    except Exception:  # the cache being down must not take the pages down
        log.warning("leaderboard cache unreachable", exc_info=True)
        found = {}
    values = {part: found[key] for part, key in keys.items() if key in found}
    missing = [part for part in keys if part not in values]
    if missing:
        computed = compute(missing)
        values.update(computed)
        try:
            cache.set_many({keys[part]: computed[part] for part in missing}, CONTENT_TIMEOUT)
        except Exception:
            log.warning("leaderboard cache unreachable", exc_info=True)
    return values


def _content_key(name: str, fingerprint: str) -> str:
    return f"{_prefix()}:{name}:{hashlib.sha256(fingerprint.encode()).hexdigest()[:32]}"


def _stored(key: object) -> object:
    """The value stored under `key` (this process's copy first), or None."""
    if not isinstance(key, str):
        return None
    if key not in _BY_CONTENT:
        found = cache.get(key)
        if found is None:
            return None
        _keep(key, found)
    return _BY_CONTENT[key]


def computed_again(name: str) -> None:
    """The refresh `cached_by_content` asked for has started: a change from now on asks again."""
    try:
        cache.delete(f"{_prefix()}:{name}:queued")
    except Exception:
        log.warning("leaderboard cache unreachable", exc_info=True)


def forget_latest(name: str) -> None:
    """No earlier value of `name` to fall back on: the next fingerprint is computed where it is
    asked for (a test's data must not meet another test's calibration)."""
    _LATEST.pop(f"{_prefix()}:{name}:latest", None)
    try:
        cache.delete_many([f"{_prefix()}:{name}:latest", f"{_prefix()}:{name}:queued"])
    except Exception:
        log.warning("leaderboard cache unreachable", exc_info=True)


def _call_quietly(refresh: Callable[[], None]) -> None:
    try:
        refresh()
    except Exception:  # a broker outage leaves the earlier value up a little longer
        log.warning("could not ask for a refresh", exc_info=True)


def _keep(key: str, value: object) -> None:
    """Keep `value` in this process, dropping the oldest of its name beyond _BY_CONTENT_KEPT."""
    _BY_CONTENT.pop(key, None)  # the newest last
    _BY_CONTENT[key] = value
    name = key.rsplit(":", 1)[0] + ":"
    same = [kept for kept in _BY_CONTENT if kept.startswith(name)]
    for oldest in same[:-_BY_CONTENT_KEPT]:
        del _BY_CONTENT[oldest]


def cached_many(items: dict[str, tuple[str, Callable[[], T]]]) -> dict[str, T]:
    """Several values, each {name: (key parts, compute)}, in one round trip to the cache.

    Entries are stored as (version, value) and count only at the current version, so the
    version and every value are read together instead of one after the other.
    """
    prefix = _prefix()
    version_key = f"{prefix}:version"
    keys = {
        name: f"{prefix}:{name}:{hashlib.sha256(parts.encode()).hexdigest()[:32]}"
        for name, (parts, _compute) in items.items()
    }
    try:
        found = cache.get_many([version_key, *keys.values()])
    except Exception:  # the cache being down must not take the pages down
        log.warning("leaderboard cache unreachable", exc_info=True)
        return {name: compute() for name, (_parts, compute) in items.items()}
    version = found.get(version_key) or current_version()
    values: dict[str, T] = {}
    fresh = {}
    for name, key in keys.items():
        entry = found.get(key)
        if entry is not None and entry[0] == version:
            values[name] = entry[1]
        else:
            values[name] = items[name][1]()
            fresh[key] = (version, values[name])
    if fresh and version:
        try:
            cache.set_many(fresh, TIMEOUT)
        except Exception:
            log.warning("leaderboard cache unreachable", exc_info=True)
    return values
