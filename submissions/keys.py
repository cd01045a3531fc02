"""API key and device-code secrets: generation and keyed hashing (HMAC-SHA256 with a pepper)."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from django.conf import settings

KEY_PREFIX = "bl_"
LOOKUP_LENGTH = 8
# Unambiguous letters for codes people type: no 0/O, 1/I/L, 2/Z, 5/S.
USER_CODE_ALPHABET = "ABCDEFGHJKMNPQRTUVWXY346789"


def keyed_hash(value: str, *, purpose: str) -> str:
    """HMAC-SHA256 under the dedicated pepper; `purpose` keeps hashes of different kinds apart."""
    message = f"{purpose}:{value}".encode()
    return hmac.new(settings.API_KEY_PEPPER.encode(), message, hashlib.sha256).hexdigest()


def new_api_key(kind: str = KEY_PREFIX, purpose: str = "api-key") -> tuple[str, str, str]:
    """(plaintext key, lookup prefix, keyed hash). The plaintext is shown once, never stored.
    `kind` and `purpose` tell API keys (bl_) from lab host keys (blh_)."""
    random_part = secrets.token_urlsafe(32).replace("-", "x").replace("_", "y")
    key = kind + random_part
    return key, random_part[:LOOKUP_LENGTH], keyed_hash(key, purpose=purpose)


def split_key(key: str, kind: str = KEY_PREFIX) -> str | None:
    """The lookup prefix of a well-formed key, or None."""
    if not key.startswith(kind) or len(key) < len(kind) + 32 or len(key) > 100:
        return None
    return key[len(kind) : len(kind) + LOOKUP_LENGTH]


def matches(key: str, stored_hash: str, purpose: str = "api-key") -> bool:
    return hmac.compare_digest(keyed_hash(key, purpose=purpose), stored_hash)


def new_device_code() -> str:
    return secrets.token_urlsafe(32)


def new_user_code() -> str:
    chars = [secrets.choice(USER_CODE_ALPHABET) for _ in range(8)]
    return "".join(chars[:4]) + "-" + "".join(chars[4:])
