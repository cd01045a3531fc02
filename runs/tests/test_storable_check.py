"""The fast storability check on every upload agrees with the walk that names the path."""

from __future__ import annotations

import json
import random

import pytest

from runs.bounds import MAX_JSON_DEPTH, _storable, _unsafe_value


def _nested(depth: int, leaf: object) -> dict:
    value: object = leaf
    for _ in range(depth):
        value = {"a": [value]} if depth % 2 else {"a": value}
    return value  # type: ignore[return-value]


BAD_LEAVES = [float("inf"), float("-inf"), float("nan"), "nul\x00", "\ud800", {"k\x00": 1}]
GOOD_LEAVES = [1, 1.5, "text", "é ✓ 🚀", None, True, [], {}]


def _cases() -> list[object]:
    cases: list[object] = []
    for depth in (0, 1, 5, MAX_JSON_DEPTH - 2, MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, 70):
        for leaf in GOOD_LEAVES + BAD_LEAVES:
            cases.append({"top": _nested(depth, leaf)})
            cases.append({"fine": list(range(5)), "deep": _nested(depth, leaf)})
    rng = random.Random(8)
    for _ in range(300):
        doc: dict = {}
        for _field in range(rng.randint(1, 6)):
            doc[f"f{rng.randint(0, 99)}"] = _nested(
                rng.randint(0, 66), rng.choice(GOOD_LEAVES + BAD_LEAVES)
            )
        cases.append(doc)
    return cases


@pytest.mark.parametrize("check_text", [True, False])
def test_the_fast_check_agrees_with_the_slow_walk(check_text: bool) -> None:
    for case in _cases():
        slow = _unsafe_value(case)[0] == ""
        if not check_text:
            # Without a \u escape in the body no string can hold NUL or a lone surrogate.
            text = json.dumps(case)
            if "\\u0000" in text or "\\ud800" in text:
                continue
        assert _storable(case, check_text=check_text) == slow, case
