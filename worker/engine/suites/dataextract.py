"""dataextract verifier: JSON recovered from the answer, scored per atomic field.

Atoms: every expected scalar (strings compared casefolded with whitespace collapsed, numbers
within ±0.01, booleans must be real booleans, ``null`` must be null); a list of scalars is one
atom matched as a multiset; a list of objects is matched item by item on an anchor key
(``validation.anchors[path]``, default the first key) and each expected key of each item is an
atom; nested objects recurse. A missing key counts as null. Extra keys are noted, not penalised.
Score = 100 × correct atoms / atoms.
"""

from __future__ import annotations

from collections import Counter

from ..providers.base import ChatResponse
from .base import Verdict
from .common import extract_json, finish, normalise


def _scalar_equal(expected: object, actual: object) -> bool:
    if expected is None:
        return actual is None
    if isinstance(expected, bool):
        return actual is expected
    if isinstance(expected, int | float):
        if isinstance(actual, bool) or not isinstance(actual, int | float):
            return False
        return abs(actual - expected) <= 0.01
    if not isinstance(actual, str):
        return False
    return normalise(expected) == normalise(actual)


def _key(value: object) -> str:
    return normalise(value) if isinstance(value, str) else repr(value)


def _count(expected: object) -> int:
    if isinstance(expected, dict):
        return sum(_count(v) for v in expected.values()) or 1
    if isinstance(expected, list) and expected and all(isinstance(i, dict) for i in expected):
        return sum(_count(i) for i in expected)
    return 1


def compare(expected: object, actual: object, anchors: dict, path: str = "$") -> tuple[int, int]:
    """(correct atoms, total atoms) of ``actual`` against ``expected``."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return 0, _count(expected)
        correct = total = 0
        for key, want in expected.items():
            c, t = compare(want, actual.get(key), anchors, f"{path}.{key}")
            correct, total = correct + c, total + t
        return correct, total or 1
    if isinstance(expected, list) and expected and all(isinstance(i, dict) for i in expected):
        total = _count(expected)
        if not isinstance(actual, list):
            return 0, total
        anchor = anchors.get(path) or next(iter(expected[0]))
        pool = [a for a in actual if isinstance(a, dict)]
        correct = 0
        for want in expected:
            match = next((a for a in pool if _scalar_equal(want.get(anchor), a.get(anchor))), None)
            if match is not None:
                pool.remove(match)
                correct += compare(want, match, anchors, path)[0]
        return correct, total
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return 0, 1
        same = Counter(map(_key, expected)) == Counter(map(_key, actual))
        return int(same), 1
    return int(_scalar_equal(expected, actual)), 1


def verify(task: dict, response: ChatResponse) -> Verdict:
    rules = task["validation"]
    value, method = extract_json(response.content)
    details: dict = {"json_method": method}
    if method == "none":
        return finish(0.0, response, {**details, "reason": "invalid_json"})
    correct, total = compare(rules["expected"], value, rules.get("anchors", {}))
    if isinstance(rules["expected"], dict) and isinstance(value, dict):
        details["extra_keys"] = sorted(set(value) - set(rules["expected"]))
    details.update(correct_atoms=correct, total_atoms=total)
    return finish(100.0 * correct / total, response, details)
