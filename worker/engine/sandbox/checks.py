"""Checks: the child computes values, the parent alone holds the expectations and judges.

A check in a suite's data is ``{"setup": "...", "expr": "...", "expect": "<Python literal>"}``
or ``{"setup": ..., "expr": ..., "raises": "ValueError"}``, optionally with ``"tolerance"``.
Only ``setup`` and ``expr`` are sent to the child; it reports the value of ``expr`` (or the
exception it raised) as a tagged value. Comparison is type-strict: ``True`` is not ``1``, a
tuple is not a list, ``2.0`` is not ``2``, unless the check declares a ``tolerance``, in which
case ints and floats (never bools) compare by value within it. A report line is only a claim:
malformed, missing, duplicated or oversized lines fail their check.
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass

REPORT_LIMIT = 1024 * 1024
MAX_DEPTH = 40
NOTE_LIMIT = 160
_NUMBERS = ("int", "float")
_SEQUENCES = ("list", "tuple")
_SETS = ("set", "frozenset")


class CheckSpecError(ValueError):
    """A check in a suite's data cannot be used (bad literal, syntax error)."""


@dataclass(frozen=True)
class Check:
    """One check; ``expect`` is a canonical value (see ``canonical``) unless ``raises`` is set."""

    expr: str
    setup: str = ""
    expect: tuple | None = None
    raises: str | None = None
    tolerance: float | None = None

    def probe(self) -> dict:
        """What the child may see: the code to run, never the expectation."""
        return {"setup": self.setup, "expr": self.expr}


@dataclass(frozen=True)
class Outcome:
    passed: bool
    note: str = ""


def parse_check(spec: dict) -> Check:
    """A ``Check`` from suite data; ``CheckSpecError`` names what is wrong."""
    setup, expr = spec.get("setup", ""), spec["expr"]
    try:
        compile(setup, "setup", "exec")
        compile(expr, "expr", "eval")
    except SyntaxError as exc:
        raise CheckSpecError(f"syntax error in check code: {exc.msg}") from exc
    if "raises" in spec:
        name = spec["raises"]
        return Check(expr, setup, raises=name if "." in name else f"builtins.{name}")
    try:
        expected = canonical(ast.literal_eval(spec["expect"]))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise CheckSpecError(f"expect is not a supported Python literal: {exc}") from exc
    tolerance = spec.get("tolerance")
    return Check(expr, setup, expect=expected, tolerance=None if tolerance is None else tolerance)


def parse_checks(specs: list[dict]) -> list[Check]:
    return [parse_check(spec) for spec in specs]


def canonical(value: object) -> tuple:
    """A trusted Python value as a hashable, type-tagged tree (``("int", 3)``, ``("list", …)``)."""
    kind = type(value)
    if value is None:
        return ("none", None)
    for tag, exact in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if kind is exact:
            return (tag, value)
    if kind is bytes:
        return ("bytes", value)
    # The exact types (not subclasses) were matched above; isinstance only tells mypy so.
    if kind in (list, tuple) and isinstance(value, list | tuple):
        return (kind.__name__, tuple(canonical(item) for item in value))
    if kind in (set, frozenset) and isinstance(value, set | frozenset):
        return (kind.__name__, frozenset(canonical(item) for item in value))
    if kind is dict and isinstance(value, dict):
        return ("dict", frozenset((canonical(k), canonical(v)) for k, v in value.items()))
    raise CheckSpecError(f"unsupported type in expect: {kind.__name__}")


def from_report(node: object, depth: int = 0) -> tuple:
    """The child's ``[tag, payload]`` as a canonical value; ``ValueError`` when malformed."""
    if depth > MAX_DEPTH or not isinstance(node, list) or len(node) != 2:
        raise ValueError("malformed value")
    tag, payload = node
    if tag == "none" and payload is None:
        return ("none", None)
    if tag == "bool" and isinstance(payload, bool):
        return ("bool", payload)
    if tag == "str" and isinstance(payload, str):
        return ("str", payload)
    if tag == "other" and isinstance(payload, str):
        return ("other", payload[:80])
    if not isinstance(payload, (str, list)):
        raise ValueError("malformed value")
    if tag == "int" and isinstance(payload, str):
        return ("int", int(payload))
    if tag == "float" and isinstance(payload, str):
        return ("float", float.fromhex(payload))
    if tag == "bytes" and isinstance(payload, str):
        return ("bytes", bytes.fromhex(payload))
    if tag in _SEQUENCES and isinstance(payload, list):
        return (tag, tuple(from_report(item, depth + 1) for item in payload))
    if tag in _SETS and isinstance(payload, list):
        items = frozenset(from_report(item, depth + 1) for item in payload)
        if len(items) != len(payload):
            raise ValueError("a set with repeated members")
        return (tag, items)
    if tag == "dict" and isinstance(payload, list):
        pairs = []
        for pair in payload:
            if not isinstance(pair, list) or len(pair) != 2:
                raise ValueError("malformed value")
            pairs.append((from_report(pair[0], depth + 1), from_report(pair[1], depth + 1)))
        if len({k for k, _ in pairs}) != len(pairs):
            raise ValueError("a dict with repeated keys")
        return ("dict", frozenset(pairs))
    raise ValueError("malformed value")


def same(expected: tuple, actual: tuple, tolerance: float | None = None) -> bool:
    """Type-strict equality of canonical values; numbers within ``tolerance`` when declared."""
    (tag, want), (got_tag, got) = expected, actual
    if tolerance is not None and tag in _NUMBERS and got_tag in _NUMBERS:
        if _is_nan(want) or _is_nan(got):
            return _is_nan(want) and _is_nan(got)
        try:
            return abs(want - got) <= tolerance
        except OverflowError:
            return False
    if tag != got_tag:
        return False
    if tag == "float":
        return want == got or (_is_nan(want) and _is_nan(got))
    if tag in _SEQUENCES:
        pairs = zip(want, got, strict=False)  # lengths compared first
        return len(want) == len(got) and all(same(w, g, tolerance) for w, g in pairs)
    if tag == "dict":
        want_map, got_map = dict(want), dict(got)
        return want_map.keys() == got_map.keys() and all(
            same(value, got_map[key], tolerance) for key, value in want_map.items()
        )
    return want == got


def _is_nan(number: float) -> bool:
    return isinstance(number, float) and math.isnan(number)


def display(value: tuple, limit: int = NOTE_LIMIT) -> str:
    """A short, bounded description of a canonical value for failure notes."""
    text = _display(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _display(value: tuple) -> str:
    tag, payload = value
    if tag in _SEQUENCES or tag in _SETS:
        inner = ", ".join(_display(item) for item in list(payload)[:8])
        more = ", …" if len(payload) > 8 else ""
        return {"list": "[{}]", "tuple": "({})", "set": "{{{}}}", "frozenset": "frozenset({{{}}})"}[
            tag
        ].format(inner + more)
    if tag == "dict":
        items = list(payload)[:8]
        return "{" + ", ".join(f"{_display(k)}: {_display(v)}" for k, v in items) + "}"
    if tag == "other":
        return f"<{payload} object>"
    return repr(payload)[:NOTE_LIMIT]


def read_report(raw: bytes, count: int) -> tuple[dict | None, dict[int, dict]]:
    """The load line and the first well-formed line per check index, from at most the limit."""
    load: dict | None = None
    entries: dict[int, dict] = {}
    for line in raw[:REPORT_LIMIT].splitlines():
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(entry, dict):
            continue
        if "load" in entry:
            load = load or entry
            continue
        index = entry.get("i")
        if type(index) is int and 0 <= index < count and index not in entries:
            entries[index] = entry
    return load, entries


def judge(check: Check, entry: dict | None) -> Outcome:
    """Whether the child's claim for one check meets the parent's expectation."""
    if entry is None:
        return Outcome(False, "no result (the run ended before this check)")
    if "setup_raised" in entry:
        return Outcome(False, f"setup raised {_exception_name(entry['setup_raised'])}")
    if "raised" in entry:
        names = entry["raised"]
        if check.raises is not None and isinstance(names, list) and check.raises in names:
            return Outcome(True)
        message = entry.get("message")
        text = message if isinstance(message, str) else ""
        return Outcome(False, f"raised {_exception_name(names)}: {text[:NOTE_LIMIT]}")
    if "value" not in entry:
        return Outcome(False, "value not reported")
    try:
        actual = from_report(entry["value"])
    except (ValueError, TypeError, RecursionError, OverflowError):
        return Outcome(False, "malformed value")
    if check.raises is not None:
        return Outcome(False, f"returned {display(actual)} instead of raising")
    assert check.expect is not None  # parse_check gives every check a raises or an expect
    if same(check.expect, actual, check.tolerance):
        return Outcome(True)
    return Outcome(False, f"got {display(actual)}")


def _exception_name(names: object) -> str:
    if isinstance(names, list) and names and isinstance(names[0], str):
        return names[0].removeprefix("builtins.")[:80]
    return "an exception"
