"""Sessions: Django's database store, for session keys that Django could have issued only."""

from __future__ import annotations

from django.contrib.sessions.backends.base import VALID_KEY_CHARS
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore

_KEY_CHARS = frozenset(VALID_KEY_CHARS)


class SessionStore(DatabaseSessionStore):
    """A cookie value is a lookup key into the session table. Django only issues keys of
    lower-case letters and digits; anything else (a NUL, which Postgres text cannot hold and
    Django's cookie parser decodes from "\\000") is no session at all, instead of a query
    that fails and makes every page a 500 for as long as the browser keeps the cookie."""

    # SessionBase._validate_session_key is Django's, left out of django-stubs.
    def _validate_session_key(self, key: str | None) -> bool:
        valid = super()._validate_session_key(key)  # type: ignore[misc]
        return bool(valid) and _KEY_CHARS.issuperset(key or "")
