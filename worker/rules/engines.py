"""An inference engine's build as the site and the bundle name it."""

from __future__ import annotations

import re

# What a llama.cpp built without its git metadata (xllamacpp's wheel) says its build is.
_NO_BUILD = re.compile(r"(?:b?0+)?(?:[-_ ]?unknown)?", re.IGNORECASE)


def known_build(text: object) -> str:
    """An engine build as reported, or "" where it names none ("b0-unknown", "unknown")."""
    value = str(text or "").strip()
    return "" if _NO_BUILD.fullmatch(value) else value
