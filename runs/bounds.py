"""What stored input may hold, so that every page, feed, export and email can show it.

The one set of rules for text, dates and JSON documents that come from uploads, imported
files, lab hosts and their endpoints (no Django imports: importer processes use it too).
Column sizes live with the models (runs.limits); this module is about characters and values.

- A *name* (model id, job model, engine, GPU, version, task id...) is one line of text: no
  control characters at all (tab and newline included), no Unicode noncharacters, no bidi
  embedding or override controls (they make one id display as another), no lone surrogates.
- A *text* (an error message, a command line) may also hold tab, newline and carriage return.
- *Raw* text (a model's output, kept as evidence) may hold anything a database can store.
Rows stored before these rules existed may still hold anything storable, so the outputs that
cannot show a character at all (XML, email headers) clean text on the way out as well.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

# No BenchLoop client existed before 2020; earlier dates are broken clocks or forgeries, and
# year-1 times with an offset are stored by Postgres as 1 BC, which Python cannot read back.
EARLIEST_MOMENT = datetime(2020, 1, 1, tzinfo=UTC)
# A machine whose clock runs ahead (or that wrote local time as UTC) is not lying.
CLOCK_SKEW = timedelta(days=1)
MAX_JSON_DEPTH = 64

_NONCHARACTERS = "\ufdd0-\ufdef" + "".join(
    f"{chr(plane * 0x10000 + 0xFFFE)}{chr(plane * 0x10000 + 0xFFFF)}" for plane in range(17)
)
_SURROGATES = "\ud800-\udfff"
_BIDI_CONTROLS = "\u202a-\u202e\u2066-\u2069"
_NAME_FORBIDDEN = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI_CONTROLS}{_NONCHARACTERS}{_SURROGATES}]")
_TEXT_FORBIDDEN = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_NONCHARACTERS}{_SURROGATES}]")
_RAW_FORBIDDEN = re.compile(f"[\x00{_SURROGATES}]")
_HEADER_BREAKS = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{_SURROGATES}]")

NAME, TEXT, RAW = "name", "text", "raw"
_FORBIDDEN = {NAME: _NAME_FORBIDDEN, TEXT: _TEXT_FORBIDDEN, RAW: _RAW_FORBIDDEN}


def text_problem(value: str, kind: str = NAME) -> str:
    """Why `value` may not be stored as a `kind` (NAME, TEXT or RAW) of text; "" if it may."""
    found = _FORBIDDEN[kind].search(value)
    if found is None:
        return ""
    char = found.group()
    return f"contains the character U+{ord(char):04X} ({_describe(char)}), which is not allowed"


def _describe(char: str) -> str:
    code = ord(char)
    if code == 0:
        return "NUL"
    if char in "\t\n\r":
        return {"\t": "tab", "\n": "newline", "\r": "carriage return"}[char]
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return "a control character"
    if 0xD800 <= code <= 0xDFFF:
        return "an unpaired surrogate"
    if 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069:
        return "a bidi control"
    return "a Unicode noncharacter"


def moment_problem(moment: datetime, *, now: datetime | None = None) -> str:
    """Why a timestamp (timezone-aware) may not be stored; "" if it may."""
    if moment < EARLIEST_MOMENT:
        return f"is before {EARLIEST_MOMENT:%Y-%m-%d}, earlier than any BenchLoop run"
    if moment - (now or datetime.now(UTC)) > CLOCK_SKEW:
        return "is in the future"
    return ""


def one_line(value: str) -> str:
    """`value` as one header-safe line (email subjects): line breaks and controls become spaces."""
    return " ".join(_HEADER_BREAKS.sub(" ", value).split())


def storable_text(value: str) -> str:
    """`value` with what no database can store (NUL, unpaired surrogates) replaced by U+FFFD:
    for text a lab host reports (an endpoint's error, a model list), which cannot be refused."""
    return _RAW_FORBIDDEN.sub("\ufffd", value)


def storable_json(value: object) -> object:
    """A copy of a JSON value with storable_text applied to every key and string, and numbers
    JSON cannot hold (NaN, infinity) as null."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {storable_text(str(k)): storable_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable_json(v) for v in value]
    return value


def json_problem(document: dict[str, Any] | list[Any], *, escapes: bool = True) -> tuple[str, str]:
    """(problem, path) for the first thing in a parsed JSON document that no database or page
    can hold: nesting deeper than MAX_JSON_DEPTH, a number JSON cannot hold (1e999 parses as
    infinity), a NUL or an unpaired surrogate in a key or string; ("", "") if there is none.

    Strings can only hold NUL or a surrogate through a \\u escape: a caller that knows its
    source text has none passes escapes=False and only depth and numbers are checked.
    """
    found = _problem(document, check_text=escapes, level=0)
    if found is None:
        return "", ""
    problem, steps = found
    return problem, _path(reversed(steps))


_DEEP = f"nests deeper than {MAX_JSON_DEPTH} levels"
_TEXT = "string contains a NUL character or an unpaired surrogate"


def _problem(
    value: dict[str, Any] | list[Any], *, check_text: bool, level: int
) -> tuple[str, list[str | int]] | None:
    """The first problem under a container and the steps to it, innermost first. This runs on
    every upload, so a path is built only on the way back up from a problem."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for step, child in items:
        if check_text and isinstance(step, str) and not _is_storable(step):
            return "key contains a NUL character or an unpaired surrogate", []
        if level >= MAX_JSON_DEPTH:
            return _DEEP, [step]  # the first child is one level too deep
        if isinstance(child, dict | list):
            found = _problem(child, check_text=check_text, level=level + 1)
            if found is not None:
                found[1].append(step)
                return found
        elif isinstance(child, float) and not math.isfinite(child):
            return "holds a number too large to represent", [step]
        elif check_text and isinstance(child, str) and not _is_storable(child):
            return _TEXT, [step]
    return None


def _path(steps: Iterable[str | int]) -> str:
    """The path ("a.b[3].c") of steps from the top down; "(body)" for the document itself."""
    path = ""
    for step in steps:
        if isinstance(step, int):
            path += f"[{step}]"
        else:
            path = f"{path}.{step}" if path else str(step)
    return path or "(body)"


def _is_storable(value: str) -> bool:
    return _RAW_FORBIDDEN.search(value) is None
