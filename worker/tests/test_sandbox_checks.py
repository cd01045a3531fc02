"""The parent's judging: type-strict, tolerant only where declared, never fooled by a claim."""

from __future__ import annotations

import json

import pytest

from worker.engine.sandbox import CheckSpecError, Limits, parse_check, parse_checks, run_python
from worker.engine.sandbox.checks import from_report, judge, read_report
from worker.engine.suites import DATA_DIR, SuiteDataError, load_suite_file

from .sandbox_kit import FAST

STRICT = [
    # (expr, expect, passes)
    ("True", "1", False),
    ("1", "True", False),
    ("(1, 2)", "[1, 2]", False),
    ("[1, 2]", "(1, 2)", False),
    ("2.0", "2", False),
    ("2", "2.0", False),
    ("{'a': True}", "{'a': 1}", False),
    ("{1, 2}", "{2, 1}", True),
    ("frozenset({1, 2})", "{1, 2}", False),
    ("{True}", "{1}", False),
    ("None", "0", False),
    ("b'a'", "'a'", False),
    ("[(1, 'x')]", "[[1, 'x']]", False),
    ("[(1, 'x')]", "[(1, 'x')]", True),
    ("{'k': [1, (2.5, None)]}", "{'k': [1, (2.5, None)]}", True),
    ("-0.0", "0.0", True),
    ("10 ** 30", "1000000000000000000000000000000", True),
]


def test_comparison_is_type_strict():
    checks = parse_checks([{"expr": expr, "expect": expect} for expr, expect, _ in STRICT])
    result = run_python("pass\n", checks=checks, limits=FAST)
    got = [o.passed for o in result.outcomes]
    assert got == [passes for _, _, passes in STRICT], list(zip(STRICT, got, strict=True))


def test_tolerance_applies_to_numbers_only_where_declared():
    specs = [
        {"expr": "0.1 + 0.2", "expect": "0.3"},
        {"expr": "0.1 + 0.2", "expect": "0.3", "tolerance": 1e-9},
        {"expr": "2", "expect": "2.0", "tolerance": 1e-9},
        {"expr": "[1.0000000001, 3]", "expect": "[1, 3.0]", "tolerance": 1e-6},
        {"expr": "True", "expect": "1", "tolerance": 0.5},
        {"expr": "2.1", "expect": "2", "tolerance": 0.01},
    ]
    result = run_python("pass\n", checks=parse_checks(specs), limits=FAST)
    assert [o.passed for o in result.outcomes] == [False, True, True, True, False, False]


def test_objects_that_claim_equality_are_reported_as_what_they_are():
    code = (
        "class Yes:\n"
        "    def __eq__(self, other):\n        return True\n"
        "class Text(str):\n"
        "    def __eq__(self, other):\n        return True\n"
        "class Number(int):\n    pass\n"
        "def answer(kind):\n"
        "    return {'yes': Yes(), 'text': Text('x'), 'number': Number(4), 'list': [Yes()]}[kind]\n"
    )
    specs = [
        {"expr": "answer('yes')", "expect": "4"},
        {"expr": "answer('text')", "expect": "'hello'"},
        {"expr": "answer('number')", "expect": "4"},
        {"expr": "answer('list')", "expect": "[4]"},
    ]
    result = run_python(code, checks=parse_checks(specs), limits=FAST)
    assert [o.passed for o in result.outcomes] == [False] * 4
    assert result.outcomes[0].note == "got <Yes object>"
    assert result.outcomes[3].note == "got [<Yes object>]"


def test_raises_checks_need_the_named_exception_or_a_subclass():
    code = (
        "class Mine(ValueError):\n    pass\n"
        "class ValueErrorLookalike(Exception):\n    pass\n"
        "def fail(kind):\n"
        "    if kind == 'value':\n        raise ValueError('no')\n"
        "    if kind == 'mine':\n        raise Mine('no')\n"
        "    if kind == 'key':\n        raise KeyError('no')\n"
        "    if kind == 'fake':\n        raise ValueErrorLookalike('no')\n"
        "    return 0\n"
    )
    specs = [
        {"expr": "fail('value')", "raises": "ValueError"},
        {"expr": "fail('mine')", "raises": "ValueError"},
        {"expr": "fail('key')", "raises": "ValueError"},
        {"expr": "fail('fake')", "raises": "ValueError"},
        {"expr": "fail('none')", "raises": "ValueError"},
        {"expr": "fail('key')", "raises": "LookupError"},
        {"expr": "fail('value')", "expect": "0"},
    ]
    result = run_python(code, checks=parse_checks(specs), limits=FAST)
    assert [o.passed for o in result.outcomes] == [True, True, False, False, False, True, False]
    assert result.outcomes[4].note == "returned 0 instead of raising"
    assert result.outcomes[6].note == "raised ValueError: no"


def test_checks_run_in_order_on_copies_of_the_solution_namespace():
    # Module state (a shared default list) carries over, names set by a check's setup do not.
    code = "def add(tag, tags=[]):\n    tags.append(tag)\n    return tags\n"
    specs = [
        {"setup": "mine = ['k']", "expr": "add('a')", "expect": "['a']"},
        {"expr": "add('b')", "expect": "['a', 'b']"},
        {"expr": "mine", "expect": "['k']"},
        {"setup": "raise RuntimeError('setup broke')", "expr": "1", "expect": "1"},
        {"expr": "len(add('c'))", "expect": "3"},
    ]
    result = run_python(code, checks=parse_checks(specs), limits=FAST)
    assert [o.passed for o in result.outcomes] == [True, True, False, False, True]
    assert result.outcomes[2].note.startswith("raised NameError")
    assert result.outcomes[3].note == "setup raised RuntimeError"


def test_a_hang_keeps_the_checks_judged_before_it():
    code = "def f(x):\n    while x == 2:\n        pass\n    return x\n"
    specs = [{"expr": f"f({x})", "expect": str(x)} for x in (1, 3, 2, 4)]
    result = run_python(code, checks=parse_checks(specs), limits=Limits(wall_s=3, cpu_s=1))
    assert result.status in {"timeout", "cpu_limit"}
    assert [o.passed for o in result.outcomes] == [True, True, False, False]
    assert result.outcomes[3].note == "no result (the run ended before this check)"


def test_report_lines_are_claims_the_parent_checks():
    check = parse_check({"expr": "x", "expect": "[1, 2]"})
    lines = [
        b"not json",
        b"[1, 2]",
        json.dumps({"i": True, "value": ["list", [["int", "1"], ["int", "2"]]]}).encode(),
        json.dumps({"i": 7, "value": ["list", []]}).encode(),
        json.dumps({"i": 0, "value": ["list", [["int", "1"], ["int", "3"]]]}).encode(),
        json.dumps({"i": 0, "value": ["list", [["int", "1"], ["int", "2"]]]}).encode(),
    ]
    load, entries = read_report(b"\n".join(lines), 1)
    assert load is None and list(entries) == [0]  # bool index and out-of-range index ignored
    assert judge(check, entries[0]).passed is False  # the first claim for an index stands


@pytest.mark.parametrize(
    "value",
    [
        ["int", "9" * 5000],
        ["set", [["int", "1"], ["int", "1"]]],
        ["dict", [[["str", "k"], ["int", "1"]], [["str", "k"], ["int", "2"]]]],
        ["float", "not-hex"],
        ["list", "oops"],
        ["bool", "yes"],
        ["tuple"],
        ["other", 5],
    ],
)
def test_malformed_values_fail(value):
    check = parse_check({"expr": "x", "expect": "[]"})
    assert judge(check, {"i": 0, "value": value}).passed is False


def test_deeply_nested_claims_are_refused_not_recursed():
    value: list = ["list", []]
    for _ in range(5000):
        value = ["list", [value]]
    with pytest.raises(ValueError, match="malformed"):
        from_report(value)


@pytest.mark.parametrize(
    "spec",
    [
        {"expr": "f()", "expect": "[1, 2"},
        {"expr": "f()", "expect": "__import__('os')"},
        {"expr": "f()", "expect": "1j"},
        {"expr": "f(", "expect": "1"},
        {"setup": "x = = 1", "expr": "x", "expect": "1"},
    ],
)
def test_unusable_checks_are_refused(spec):
    with pytest.raises(CheckSpecError):
        parse_check(spec)


def test_a_bad_check_in_a_suite_file_fails_on_load(tmp_path):
    doc = json.loads((DATA_DIR / "coding.suite.json").read_text())
    doc["tasks"][3]["validation"]["checks"][0]["expect"] = "[[1, 6], [8, 10]"
    bad = tmp_path / "coding.suite.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(SuiteDataError, match="code-04-merge-intervals check 0"):
        load_suite_file(bad)
    doc["tasks"][3]["validation"]["checks"][0] = {"expr": "1", "expect": "1", "raises": "X"}
    bad.write_text(json.dumps(doc))
    with pytest.raises(SuiteDataError, match=r"tasks/3 \(code-04-merge-intervals\)/validation"):
        load_suite_file(bad)


def test_the_models_own_exit_status_is_never_taken_for_a_broken_sandbox():
    # 70 is what the child uses when the cage itself could not be set up.
    checks = parse_checks([{"expr": "1", "expect": "1"}])
    result = run_python("raise SystemExit(70)\n", checks=checks, limits=FAST)
    assert result.status == "error"
    assert [o.passed for o in result.outcomes] == [False]
