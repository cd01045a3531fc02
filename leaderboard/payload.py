"""Readers for a stored run's raw payload: values are taken only when they have the type the
schema gives them, since an older or legacy upload (or a hostile one) may hold anything under a
name. The run page's resources and the sweeps figures read the bundle through these."""

from __future__ import annotations

import math
from typing import Any

TEXT_CHARS = 300  # a note or reason is shown whole up to here, then cut


def number(value: Any) -> float | None:
    """A finite JSON number as a float; anything else (a string, a bool, NaN) is None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def count(value: Any, *, high: int) -> int | None:
    """A whole number from 0 to `high` (a token count, a depth, a stream count), else None."""
    found = number(value)
    if found is None or found != int(found) or not 0 <= found <= high:
        return None
    return int(found)


def text(value: Any) -> str:
    return value[:TEXT_CHARS] if isinstance(value, str) else ""


def reason(value: Any) -> str:
    """A note's reason, without the "not measured: " the engine starts it with (the page says
    that itself)."""
    found = text(value)
    return found[len("not measured: ") :] if found.startswith("not measured: ") else found


def body(raw: Any) -> dict[str, Any]:
    """The bundle inside a stored payload: the v3 envelope's `run`, or the payload itself."""
    if not isinstance(raw, dict):
        return {}
    inner = raw.get("run")
    return inner if isinstance(inner, dict) else raw


def block(raw: Any, name: str) -> dict[str, Any]:
    """One top-level block of the bundle, or {} when it is missing or not an object."""
    found = body(raw).get(name)
    return found if isinstance(found, dict) else {}
