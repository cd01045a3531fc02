"""The one walk that finds what no database or page can hold in an uploaded JSON document, and
names where it is."""

from __future__ import annotations

import pytest

from runs.bounds import MAX_JSON_DEPTH, json_problem

DEEP = f"nests deeper than {MAX_JSON_DEPTH} levels"
TEXT = "string contains a NUL character or an unpaired surrogate"
KEY = "key contains a NUL character or an unpaired surrogate"
NUMBER = "holds a number too large to represent"


def _nested(depth: int, leaf: object) -> dict:
    """{"a": {"a": ... leaf}} with `depth` containers under the top one."""
    value: object = leaf
    for _ in range(depth):
        value = {"a": value}
    return {"top": value}


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"fine": [1, 1.5, "é ✓ 🚀", None, True, [], {}]}, ("", "")),
        ({"speed": {"trials": [1.0, float("inf")]}}, (NUMBER, "speed.trials[1]")),
        ({"a": [{"b": float("nan")}]}, (NUMBER, "a[0].b")),
        ({"ok": 1, "model": {"name": "nul\x00"}}, (TEXT, "model.name")),
        ({"list": ["fine", "\ud800"]}, (TEXT, "list[1]")),
        ({"suites": [{"k\x00": 1}]}, (KEY, "suites[0]")),
        ({"bad\x00": 1}, (KEY, "(body)")),
        ([float("-inf")], (NUMBER, "[0]")),
    ],
)
def test_the_first_problem_is_named_with_its_path(document, expected) -> None:
    assert json_problem(document) == expected


def test_depth_is_counted_in_containers_and_the_first_too_deep_value_is_named() -> None:
    assert json_problem(_nested(MAX_JSON_DEPTH - 1, 1)) == ("", "")
    assert json_problem(_nested(MAX_JSON_DEPTH - 1, {})) == ("", "")  # empty: nothing deeper
    problem, path = json_problem(_nested(MAX_JSON_DEPTH, 1))
    assert problem == DEEP and path == "top" + ".a" * MAX_JSON_DEPTH
    # A problem past the limit is reported as depth, where the limit is crossed.
    problem, path = json_problem(_nested(70, float("inf")))
    assert problem == DEEP and path == "top" + ".a" * MAX_JSON_DEPTH


def test_without_escapes_in_the_source_only_depth_and_numbers_are_checked() -> None:
    assert json_problem({"k\x00": "nul\x00"}, escapes=False) == ("", "")
    assert json_problem({"x": "nul\x00", "y": float("inf")}, escapes=False) == (NUMBER, "y")
    assert json_problem({"x": "nul\x00", "y": float("inf")}) == (TEXT, "x")
