"""loop_code_fix verifier: fixed files and diffs run against the task's tests in the sandbox."""

from __future__ import annotations

import pytest

from worker.engine.providers.base import ChatResponse
from worker.engine.suites import available_suites
from worker.engine.suites.loop_code_fix import apply_unified_diff, verify

SUITE = available_suites()["loop_code_fix"]
TASKS = {t["id"]: t for t in SUITE.effective_tasks()}

FIXED_MAX = '''def largest(numbers):
    """Largest value of a non-empty list."""
    best = numbers[0]
    for n in numbers:
        if n > best:
            best = n
    return best
'''

DIFF_MAX = """--- a/module.py
+++ b/module.py
@@ -1,7 +1,7 @@
 def largest(numbers):
     \"\"\"Largest value of a non-empty list.\"\"\"
-    best = 0
+    best = numbers[0]
     for n in numbers:
         if n > best:
             best = n
"""


def reply(text: str, finish: str = "stop") -> ChatResponse:
    return ChatResponse(content=text, finish_reason=finish)


def score(task_id: str, text: str) -> tuple[float, bool]:
    verdict = verify(TASKS[task_id], reply(text))
    return verdict.score, verdict.passed


def test_suite_has_twelve_tasks():
    assert len(SUITE.tasks) == 12


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_every_shipped_module_really_fails_its_tests(task_id):
    module = TASKS[task_id]["validation"]["module"]
    assert verify(TASKS[task_id], reply(f"```python\n{module}```")).score < 100.0


def test_correct_fixed_file_scores_100():
    assert score("fix-10", f"Here is the fix:\n```python\n{FIXED_MAX}```") == (100.0, True)


def test_correct_unified_diff_scores_100():
    verdict = verify(TASKS["fix-10"], reply(f"```diff\n{DIFF_MAX}```"))
    assert (verdict.score, verdict.passed) == (100.0, True)
    assert verdict.details["answer_kind"] == "diff"


def test_diff_with_wrong_line_numbers_still_applies_by_content():
    shifted = DIFF_MAX.replace("@@ -1,7 +1,7 @@", "@@ -3,7 +3,7 @@")
    assert score("fix-10", f"```diff\n{shifted}```") == (100.0, True)


def test_patch_that_does_not_apply_scores_zero():
    broken = DIFF_MAX.replace("-    best = 0", "-    best = None")
    verdict = verify(TASKS["fix-10"], reply(f"```diff\n{broken}```"))
    assert (verdict.score, verdict.passed) == (0.0, False)
    assert verdict.details["reason"] == "patch_does_not_apply"


def test_partial_fix_gets_the_fraction_of_tests():
    # Handles the "and not % 100" part but forgets years divisible by 400: 3 of 4 tests.
    partial = "def is_leap(year):\n    return year % 4 == 0 and year % 100 != 0 or year == 1600\n"
    assert score("fix-02", f"```python\n{partial}```") == (75.0, False)


def test_wrong_fix_scores_like_the_bug():
    wrong = "def c_to_f(celsius):\n    return celsius * 5 / 9 + 32\n"
    # 0 → 32 passes; 100 and -40 fail: 1 of 3.
    assert score("fix-09", f"```python\n{wrong}```") == (33.33, False)


def test_empty_and_prose_answers_score_zero():
    assert score("fix-01", "") == (0.0, False)
    assert score("fix-01", "Change range(n) to range(n + 1).") == (0.0, False)


def test_unicode_comment_in_fix():
    fixed = "def total_up_to(n):\n    # inclusive: 1 + 2 + … + n ✓\n    return sum(range(n + 1))\n"
    assert score("fix-01", f"```python\n{fixed}```") == (100.0, True)


def test_apply_unified_diff_rejects_garbage():
    assert apply_unified_diff("x = 1\n", "not a diff") is None
    assert apply_unified_diff("x = 1\n", "@@ -1 +1 @@\n-x = 2\n+x = 3\n") is None
    assert apply_unified_diff("x = 1\n", "@@ -1 +1 @@\n-x = 1\n+x = 3\n") == "x = 3\n"


def test_truncated_fix_cannot_pass():
    verdict = verify(TASKS["fix-10"], reply(f"```python\n{FIXED_MAX}```", finish="length"))
    assert verdict.passed is False
    assert verdict.details["evaluation_status"] == "truncated"


# Our own reference fixes: each must score 100, which proves every check is satisfiable.
FIXES = {
    "fix-01": "def total_up_to(n):\n    return sum(range(n + 1))\n",
    "fix-02": (
        "def is_leap(year):\n    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n"
    ),
    "fix-03": "def clamp(x, lo, hi):\n    return max(lo, min(hi, x))\n",
    "fix-04": "def count_vowels(text):\n    return sum(ch in 'aeiou' for ch in text.lower())\n",
    "fix-05": "def dedupe(items):\n    return list(dict.fromkeys(items))\n",
    "fix-06": "def ratio(a, b):\n    if b == 0:\n        return None\n    return a / b\n",
    "fix-07": (
        "def fizzbuzz(n):\n"
        "    if n % 15 == 0:\n        return 'FizzBuzz'\n"
        "    if n % 3 == 0:\n        return 'Fizz'\n"
        "    if n % 5 == 0:\n        return 'Buzz'\n"
        "    return str(n)\n"
    ),
    "fix-08": (
        "def add_tag(tag, tags=None):\n"
        "    tags = [] if tags is None else tags\n    tags.append(tag)\n    return tags\n"
    ),
    "fix-09": "def c_to_f(celsius):\n    return celsius * 9 / 5 + 32\n",
    "fix-10": FIXED_MAX,
    "fix-11": "def reverse_words(sentence):\n    return ' '.join(reversed(sentence.split()))\n",
    "fix-12": (
        "def parse_pairs(text):\n"
        "    out = {}\n"
        "    for part in text.split(';'):\n"
        "        if part.strip():\n"
        "            key, value = part.split('=')\n"
        "            out[key.strip()] = value.strip()\n"
        "    return out\n"
    ),
}


@pytest.mark.parametrize("task_id", sorted(FIXES))
def test_reference_fix_scores_100(task_id):
    verdict = verify(TASKS[task_id], reply(f"```python\n{FIXES[task_id]}```"))
    assert (verdict.score, verdict.passed) == (100.0, True), verdict.details
    assert verdict.details["sandbox"]["level"] == "os"


def test_every_task_has_a_reference_fix():
    assert set(FIXES) == set(TASKS)


def test_types_are_judged_strictly_where_the_task_says_so():
    # "a divided by b as a float": the integer 3 is not the float 3.0 (the shown bug returns
    # a // b), while a temperature may be an int or a float of the right value.
    floor = "def ratio(a, b):\n    if b == 0:\n        return None\n    return float(a // b)\n"
    assert score("fix-06", f"```python\n{floor}```") == (50.0, False)
    integer_f = "def c_to_f(celsius):\n    return celsius * 9 // 5 + 32\n"
    assert score("fix-09", f"```python\n{integer_f}```") == (100.0, True)
    truthy = FIXES["fix-02"].replace("return ", "return int(").rstrip() + ")\n"
    assert score("fix-02", f"```python\n{truthy}```") == (0.0, False)
