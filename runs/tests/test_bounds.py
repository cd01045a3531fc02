"""The one set of rules for stored text and dates (runs.bounds), character class by class."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest

from core.feeds import xml_text
from runs import bounds

FORBIDDEN_IN_NAMES = {
    "NUL": "\x00",
    "bell": "\x07",
    "tab": "\t",
    "newline": "\n",
    "carriage return": "\r",
    "escape": "\x1b",
    "DEL": "\x7f",
    "C1 control": "\x85",
    "U+FFFE": "\ufffe",
    "U+FFFF": "\uffff",
    "noncharacter U+FDD0": "\ufdd0",
    "plane-1 noncharacter": "\U0001fffe",
    "right-to-left override": "\u202e",
    "first strong isolate": "\u2068",
    "lone high surrogate": "\ud800",
    "lone low surrogate": "\udfff",
}
FINE_EVERYWHERE = [
    "qwen3:8b",
    "Llama-3.1-8B-Instruct-Q4_K_M.gguf",
    "RTX 4090 24 GB",
    "é ✓ 🚀",
    "שלום",
]


@pytest.mark.parametrize("name", FORBIDDEN_IN_NAMES)
def test_a_name_refuses_each_class_of_invisible_or_unstorable_character(name: str) -> None:
    problem = bounds.text_problem(f"model{FORBIDDEN_IN_NAMES[name]}x", bounds.NAME)
    assert problem.startswith("contains the character U+"), name


@pytest.mark.parametrize("value", FINE_EVERYWHERE)
def test_ordinary_names_in_any_script_pass(value: str) -> None:
    assert bounds.text_problem(value, bounds.NAME) == ""


def test_text_allows_line_breaks_and_tabs_but_not_other_controls() -> None:
    assert bounds.text_problem("line one\n\tline two\r\n", bounds.TEXT) == ""
    for char in ("\x00", "\x07", "\x1b", "\ufffe", "\ud800"):
        assert bounds.text_problem(f"a{char}b", bounds.TEXT), repr(char)
    # Bidi controls are a spoofing risk in an id, not in a sentence.
    assert bounds.text_problem("abc \u202e def", bounds.TEXT) == ""


def test_raw_text_only_refuses_what_no_database_can_store() -> None:
    assert bounds.text_problem("\x1b[31mred\x1b[0m \x07 \ufffe", bounds.RAW) == ""
    assert bounds.text_problem("a\x00b", bounds.RAW) and bounds.text_problem("\udc80", bounds.RAW)


def test_dates_before_2020_or_beyond_a_day_ahead_are_refused() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    assert bounds.moment_problem(datetime(2020, 1, 1, tzinfo=UTC), now=now) == ""
    assert bounds.moment_problem(now + timedelta(hours=23), now=now) == ""
    assert "before 2020-01-01" in bounds.moment_problem(
        datetime(2019, 12, 31, 23, 59, tzinfo=UTC), now=now
    )
    year_one = datetime.fromisoformat("0001-01-01T00:00:00+05:00")
    assert "before 2020-01-01" in bounds.moment_problem(year_one, now=now)
    assert bounds.moment_problem(now + timedelta(days=1, seconds=1), now=now) == "is in the future"


def test_xml_text_keeps_every_xml_character_and_replaces_the_rest() -> None:
    every_bad = "".join(FORBIDDEN_IN_NAMES.values())
    cleaned = xml_text(f"a{every_bad}b\t\n")
    ET.fromstring(f"<t>{cleaned.replace('&', '&amp;').replace('<', '&lt;')}</t>")
    assert cleaned.startswith("a") and cleaned.endswith("b\t\n")
    assert "\u202e" in cleaned and "\x85" in cleaned  # XML holds these; only names refuse them
    assert xml_text("é ✓ 🚀 <ok>") == "é ✓ 🚀 <ok>"


def test_one_line_makes_any_stored_text_a_header_safe_line() -> None:
    assert bounds.one_line("run of evil\nBcc: x@example.org\r\n is approved") == (
        "run of evil Bcc: x@example.org is approved"
    )
    assert "\n" not in bounds.one_line("a\u2028b\x85c\x00d")


def test_storable_json_replaces_what_postgres_cannot_hold() -> None:
    value = {"k\x00": ["a\x00b", "\ud800", float("nan"), 1.5, {"deep": "x\x07"}]}
    assert bounds.storable_json(value) == {
        "k\ufffd": ["a\ufffdb", "\ufffd", None, 1.5, {"deep": "x\x07"}]
    }
