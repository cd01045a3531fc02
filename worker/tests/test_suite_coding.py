"""coding verifier: hidden tests in the sandbox, on hand-written answers with written-out scores."""

from __future__ import annotations

import hashlib
import json

import pytest

from worker.engine.bundle import validation_errors
from worker.engine.orchestrator import run_benchmark
from worker.engine.plan import RunConfig
from worker.engine.providers.base import ChatResponse
from worker.engine.suites import available_suites
from worker.engine.suites.coding import extract_code, verify

SUITE = available_suites()["coding"]
TASKS = {t["id"]: t for t in SUITE.effective_tasks()}

# Our own reference solutions: each must score 100, which proves every hidden test is satisfiable.
REFERENCES = {
    "code-01-slugify": r"""
import re
def slugify(text):
    return re.sub(r'[^a-z0-9]+', '-', text.lower()).strip('-')
""",
    "code-02-parse-duration": r"""
import re
def parse_duration(text):
    m = re.fullmatch(r'(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?', text)
    if not text or not m:
        raise ValueError(text)
    h, mi, s = (int(g or 0) for g in m.groups())
    return h*3600 + mi*60 + s
""",
    "code-03-lrucache": r"""
from collections import OrderedDict
class LRUCache:
    def __init__(self, capacity):
        self.capacity = capacity
        self.data = OrderedDict()
    def get(self, key):
        if key not in self.data:
            return -1
        self.data.move_to_end(key)
        return self.data[key]
    def put(self, key, value):
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.capacity:
            self.data.popitem(last=False)
""",
    "code-04-merge-intervals": r"""
def merge_intervals(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out
""",
    "code-05-roman-to-int": r"""
def roman_to_int(numeral):
    v = {'I':1,'V':5,'X':10,'L':50,'C':100,'D':500,'M':1000}
    total = 0
    for a, b in zip(numeral, numeral[1:] + ' '):
        total += -v[a] if b != ' ' and v[a] < v[b] else v[a]
    return total
""",
    "code-06-chunked": r"""
def chunked(items, size):
    if size < 1:
        raise ValueError(size)
    out, cur = [], []
    for x in items:
        cur.append(x)
        if len(cur) == size:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out
""",
    "code-07-median": r"""
def median(values):
    s = sorted(values)
    if not s:
        raise ValueError('empty')
    n = len(s)
    return s[n//2] if n % 2 else (s[n//2-1] + s[n//2]) / 2
""",
    "code-08-word-frequencies": r"""
import re
from collections import Counter
def word_frequencies(text, top_n):
    c = Counter(re.findall(r"[a-z']+", text.lower()))
    return sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:top_n]
""",
    "code-09-flatten": r"""
def flatten(nested):
    out = []
    for x in nested:
        if isinstance(x, (list, tuple)):
            out.extend(flatten(x))
        else:
            out.append(x)
    return out
""",
    "code-10-is-valid-isbn10": r"""
def is_valid_isbn10(code):
    s = code.replace('-', '')
    if len(s) != 10 or not s[:9].isdigit() or not (s[9].isdigit() or s[9] == 'X'):
        return False
    vals = [int(c) for c in s[:9]] + [10 if s[9] == 'X' else int(s[9])]
    return sum(v * w for v, w in zip(vals, range(10, 0, -1))) % 11 == 0
""",
    "code-11-retry": r"""
import functools
def retry(times):
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            last = None
            for _ in range(times):
                try:
                    return fn(*a, **k)
                except Exception as exc:
                    last = exc
            raise last
        return wrapper
    return deco
""",
    "code-12-rle": r"""
import re
from itertools import groupby
def rle_encode(text):
    return ''.join(f'{k}{len(list(g))}' for k, g in groupby(text))
def rle_decode(encoded):
    return ''.join(c * int(n) for c, n in re.findall(r'(\D)(\d+)', encoded))
""",
}


def answer(code: str, finish: str = "stop", fence: str = "python") -> ChatResponse:
    return ChatResponse(content=f"```{fence}\n{code}```", finish_reason=finish)


def test_suite_has_twelve_tasks():
    assert len(SUITE.tasks) == 12
    assert set(REFERENCES) == set(TASKS)


@pytest.mark.parametrize("task_id", sorted(REFERENCES))
def test_reference_solution_scores_100(task_id):
    verdict = verify(TASKS[task_id], answer(REFERENCES[task_id].lstrip("\n")))
    assert (verdict.score, verdict.passed) == (100.0, True), verdict.details


def test_wrong_solution_scores_zero():
    verdict = verify(
        TASKS["code-05-roman-to-int"], answer("def roman_to_int(numeral):\n    return 0\n")
    )
    assert (verdict.score, verdict.passed) == (0.0, False)


def test_partial_solution_gets_the_fraction_of_tests_passed():
    # The original buggy median: passes the odd-length and single-value tests only (2 of 5).
    buggy = "def median(values):\n    values.sort()\n    return values[len(values) // 2]\n"
    verdict = verify(TASKS["code-07-median"], answer(buggy))
    assert (verdict.score, verdict.passed) == (40.0, False)
    assert verdict.details["tests_passed"] == 2


def test_empty_answer_is_missing_code():
    verdict = verify(TASKS["code-01-slugify"], ChatResponse(content="", finish_reason="stop"))
    assert verdict.score == 0.0
    assert verdict.details["reason"] == "missing_code"


def test_syntax_error_scores_zero():
    verdict = verify(TASKS["code-01-slugify"], answer("def slugify(text)\n    return text\n"))
    assert verdict.score == 0.0
    assert verdict.details["reason"] == "syntax_error"


def test_forbidden_import_is_policy_rejected():
    code = "import os\ndef slugify(text):\n    return os.getcwd()\n"
    verdict = verify(TASKS["code-01-slugify"], answer(code))
    assert verdict.score == 0.0
    assert verdict.details["reason"] == "policy_rejected"


def test_prose_without_code_scores_zero():
    verdict = verify(
        TASKS["code-01-slugify"],
        ChatResponse(
            content="You should lower-case the text and replace spaces.", finish_reason="stop"
        ),
    )
    assert verdict.score == 0.0


def test_crash_on_load_scores_zero():
    verdict = verify(TASKS["code-06-chunked"], answer("raise SystemExit(0)\n"))
    assert verdict.score == 0.0
    assert verdict.details["reason"] == "crash_on_load"


def test_unclosed_fence_and_plain_fence_are_extracted():
    assert extract_code("```python\ndef f():\n    return 1\n") == "def f():\n    return 1"
    assert extract_code("Here:\n```\nx = 1\n```\nDone") == "x = 1"
    assert extract_code("```py\nx = 2\n```") == "x = 2"


def test_unicode_in_code_and_strings():
    code = (
        "import re\n"
        "def slugify(text):\n"
        "    # Ünïcödé comment: « café » → caf\n"
        "    return re.sub(r'[^a-z0-9]+', '-', text.lower()).strip('-')\n"
    )
    verdict = verify(TASKS["code-01-slugify"], answer(code))
    assert verdict.score == 100.0


def test_infinite_loop_times_out_and_scores_zero():
    code = "def chunked(items, size):\n    while True:\n        pass\n"
    verdict = verify(TASKS["code-06-chunked"], answer(code))
    assert verdict.score == 0.0
    assert verdict.details["sandbox_status"] in {"cpu_limit", "timeout"}


def test_truncated_answer_is_recorded_and_cannot_pass():
    verdict = verify(
        TASKS["code-09-flatten"],
        answer(REFERENCES["code-09-flatten"].lstrip("\n"), finish="length"),
    )
    assert verdict.passed is False
    assert verdict.details["evaluation_status"] == "truncated"


# What each published version's checks hash to. Changing a check changes what a score means, so
# it needs a new suite version (and a new line here); 1.x ran assert lines inside the sandbox.
PUBLISHED = {
    ("coding", "2.0.0"): "96e4e6eec4f5a523",
    ("loop_code_fix", "2.0.0"): "2bcf2e0b1287baec",
}


@pytest.mark.parametrize("name", ["coding", "loop_code_fix"])
def test_changed_checks_come_with_a_new_suite_version(name):
    suite = available_suites()[name]
    blocks = json.dumps([t["validation"] for t in suite.tasks], sort_keys=True).encode()
    digest = hashlib.sha256(blocks).hexdigest()[:16]
    assert PUBLISHED.get((name, suite.version)) == digest, (
        f"{name} {suite.version}: its checks changed; bump the suite version"
    )


@pytest.mark.llm
def test_a_real_models_answers_run_caged_and_are_judged_outside(llm_url, bench_home):
    outcome = run_benchmark(
        RunConfig(
            url=llm_url,
            suites=["coding", "loop_code_fix"],
            tasks=["code-05-roman-to-int", "fix-01"],
            max_tokens=96,
            home=bench_home,
        )
    )
    bundle = outcome.bundle
    assert validation_errors(bundle) == []
    records = [t for s in bundle["suites"].values() for t in s["tasks"]]
    assert sorted(t["task_id"] for t in records) == ["code-05-roman-to-int", "fix-01"]
    for record in records:
        assert record["execution_ok"] is True, record["error"]
        verdict = record["metadata"]["verdict"]
        assert verdict["sandbox"]["level"] == "os", verdict
        assert 0.0 <= record["score"] <= 100.0
