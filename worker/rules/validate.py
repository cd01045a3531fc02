"""Check a job event against the protocol's own types (worker.rules.contract's progress events).

The site runs every event an agent posts through ``check_event`` before it stores a byte: a
value of the wrong type, a number out of range or an event over the size cap is named by its
path, never passed on to a column that would refuse it later. Fields the types do not name are
dropped (a newer engine may add some; nothing the site does reads them). The agent runs its
events through ``fit_event`` first, so its own long texts are trimmed rather than refused.
"""

from __future__ import annotations

import json
import math
import types
import typing
from typing import Any, Literal, NotRequired, Required, get_args, get_origin, is_typeddict

from . import contract
from .protocol import MAX_EVENT_BYTES

# A count (tasks, trials, chunks, passes) is at most this; byte sizes (a model pull's) at most
# 2**53, the largest integer a JSON reader anywhere keeps exactly.
MAX_COUNT = 1_000_000
MAX_BYTES_COUNT = 2**53
BYTE_FIELDS = frozenset({"size_bytes", "total", "completed"})
# Rates, times and scores are finite and non-negative; none is anywhere near this.
MAX_FIGURE = 1e9
MAX_ITEMS = 200  # entries of a list or a map inside an event

EVENT_TYPES: dict[str, Any] = {
    get_args(typing.get_type_hints(kind, include_extras=True)["type"])[0]: kind
    for kind in get_args(contract.ProgressEvent)
}


class BadEvent(ValueError):
    """What is wrong with an event, and where (``events[3].event.total_tasks``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path, self.message = path, message


def check_event(event: object, path: str, *, allowed: frozenset[str] | None = None) -> Any:
    """The event as the types describe it (fields they do not name dropped); raises BadEvent
    when it is not one. ``allowed`` narrows the event types accepted (the live tick is a
    ``task_progress`` only)."""
    if not isinstance(event, dict):
        raise BadEvent(path, "must be an object")
    kind = event.get("type")
    names = sorted(allowed if allowed is not None else EVENT_TYPES)
    if not isinstance(kind, str) or kind not in names:
        raise BadEvent(f"{path}.type", f"must be one of: {', '.join(names)}")
    clean = _check(event, EVENT_TYPES[kind], path, "")
    size = len(json.dumps(clean, ensure_ascii=False).encode())
    if size > MAX_EVENT_BYTES:
        raise BadEvent(path, f"is {size} bytes; an event may be at most {MAX_EVENT_BYTES} bytes")
    return clean


def _check(value: object, hint: Any, path: str, name: str) -> Any:
    origin = get_origin(hint)
    if origin in (NotRequired, Required):
        return _check(value, get_args(hint)[0], path, name)
    if origin in (types.UnionType, typing.Union):
        problems: list[BadEvent] = []
        for arm in get_args(hint):
            try:
                return _check(value, arm, path, name)
            except BadEvent as bad:
                problems.append(bad)
        # The most telling arm's complaint: a nested one, else the first that is not "null".
        nested = [p for p in problems if p.path != path]
        raise (nested or [p for p in problems if "null" not in p.message] or problems)[0]
    if hint is type(None):
        if value is not None:
            raise BadEvent(path, "must be null")
        return None
    if origin is Literal:
        choices = get_args(hint)
        if value not in choices or not isinstance(value, str):
            raise BadEvent(path, f"must be one of: {', '.join(map(str, choices))}")
        return value
    if hint is Any:
        return value  # an open block: the event's size cap bounds it
    if hint is bool:
        if not isinstance(value, bool):
            raise BadEvent(path, "must be true or false")
        return value
    if hint is int:
        return _integer(value, path, name)
    if hint is float:
        return _figure(value, path)
    if hint is str:
        if not isinstance(value, str):
            raise BadEvent(path, "must be a string")
        return value
    if origin is list:
        if not isinstance(value, list) or len(value) > MAX_ITEMS:
            raise BadEvent(path, f"must be a list of at most {MAX_ITEMS} items")
        (item,) = get_args(hint)
        return [_check(v, item, f"{path}[{i}]", name) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict) or len(value) > MAX_ITEMS:
            raise BadEvent(path, f"must be an object of at most {MAX_ITEMS} entries")
        _key, item = get_args(hint)
        return {str(k): _check(v, item, f"{path}.{k}", name) for k, v in value.items()}
    if is_typeddict(hint):
        if not isinstance(value, dict):
            raise BadEvent(path, "must be an object")
        fields = typing.get_type_hints(hint, include_extras=True)
        return {
            key: _check(v, fields[key], f"{path}.{key}", key)
            for key, v in value.items()
            if key in fields
        }
    raise TypeError(f"the protocol uses a type this check does not know: {hint!r}")


def _integer(value: object, path: str, name: str) -> int:
    top = MAX_BYTES_COUNT if name in BYTE_FIELDS else MAX_COUNT
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadEvent(path, "must be a whole number")
    if not 0 <= value <= top:
        raise BadEvent(path, f"must be between 0 and {top}")
    return value


def _figure(value: object, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadEvent(path, "must be a number")
    if not (math.isfinite(value) and 0 <= value <= MAX_FIGURE):
        raise BadEvent(path, f"must be a finite number between 0 and {MAX_FIGURE:.0e}")
    return float(value)


def _size(data: dict[str, Any]) -> int:
    return len(json.dumps(data, ensure_ascii=False, default=str).encode())


def fit_event(event: contract.ProgressEvent) -> contract.ProgressEvent:
    """``event`` with its longest texts cut until it fits the site's size cap (an endpoint's
    error page must not cost the job its story); the cut is marked."""
    data: dict[str, Any] = dict(event)
    marker = " [... cut to fit the event size cap]"
    while _size(data) > MAX_EVENT_BYTES:
        texts = [(len(v), k) for k, v in data.items() if isinstance(v, str) and k != "type"]
        texts = [(n, k) for n, k in texts if n > len(marker) * 2]
        if not texts:
            break  # what is too big is no text: the site says so
        length, key = max(texts)
        text, low, high = data[key], 0, length - len(marker) * 2
        while low < high:  # the longest head that fits (escapes make bytes hard to count)
            middle = (low + high + 1) // 2
            if _size({**data, key: text[:middle] + marker}) <= MAX_EVENT_BYTES:
                low = middle
            else:
                high = middle - 1
        data[key] = text[:low] + marker
    return typing.cast(contract.ProgressEvent, data)
