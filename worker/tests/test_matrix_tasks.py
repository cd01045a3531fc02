"""The matrix tasks are sound: the starting workspace fails its verdict, a right answer passes it,
and a failure is put down to the right cause."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.engine.matrix.spec import Overhead, ProgramResult, RequestRecord, summarize
from worker.engine.matrix.suite import (
    MatrixSuite,
    classify,
    judge,
    named_files,
    write_workspace,
)
from worker.engine.suites import available_suites, load_profiles

# A right answer per task, as files that replace or join the workspace's.
SOLUTIONS = Path(__file__).parent / "data" / "matrix_solutions"
MATRIX = ("matrix_bugfix", "matrix_tools", "matrix_long")


def _tasks() -> list[dict]:
    suites = available_suites()
    return [task for name in MATRIX for task in suites[name].tasks]


def test_the_matrix_profile_runs_the_three_suites_on_our_runner():
    suites = available_suites()
    assert load_profiles()["profiles"]["matrix"]["suites"] == list(MATRIX)
    assert all(isinstance(suites[name], MatrixSuite) for name in MATRIX)
    assert sorted(t["id"] for t in _tasks()) == sorted(p.name for p in SOLUTIONS.iterdir())


@pytest.mark.parametrize("task", _tasks(), ids=lambda t: t["id"])
def test_the_named_files_are_in_the_workspace_and_code_tasks_have_a_repository_around_them(
    task: dict,
):
    named = named_files(task)
    assert set(named) <= set(task["workspace"])
    if "judge_file" in task["validation"]:
        assert task["validation"]["judge_file"] in named
        # Code the named files do not cover: what Aider's repository map summarises.
        assert any(p.endswith(".py") and p not in named for p in task["workspace"])


@pytest.mark.parametrize("task", _tasks(), ids=lambda t: t["id"])
def test_the_start_fails_and_the_solution_passes(task: dict, tmp_path: Path):
    start = tmp_path / "start"
    write_workspace(task["workspace"], start)
    score, passed, _ = judge(task["validation"], start)
    assert (score, passed) == (0.0, False) or (not passed and score < 100)

    solved = tmp_path / "solved"
    answer = {
        p.name.removesuffix(".txt"): p.read_text() for p in (SOLUTIONS / task["id"]).iterdir()
    }
    write_workspace({**task["workspace"], **answer}, solved)
    score, passed, details = judge(task["validation"], solved)
    assert (score, passed) == (100.0, True), details


def test_an_answer_file_with_extra_or_wrong_keys_does_not_pass(tmp_path: Path):
    validation = {"answer_file": "a.json", "expect_json": {"x": 1, "y": 2}}
    (tmp_path / "a.json").write_text('{"x": 1, "y": 2, "z": 3}')
    assert judge(validation, tmp_path)[:2] == (pytest.approx(66.67), False)
    (tmp_path / "a.json").write_text('{"x": true, "y": 2}')  # True is not 1
    assert judge(validation, tmp_path)[:2] == (50.0, False)
    (tmp_path / "a.json").write_text("not json")
    assert judge(validation, tmp_path)[2] == {"reason": "a.json is not JSON"}


def test_a_solution_that_escapes_the_code_sandbox_policy_scores_nothing(tmp_path: Path):
    task = next(t for t in _tasks() if t["id"] == "mx-fix-01")
    evil = "import os\ndef late_fee(d):\n    return os.getpid()\n"
    write_workspace({**task["workspace"], "fees.py": evil}, tmp_path)
    score, passed, details = judge(task["validation"], tmp_path)
    assert (score, passed, details["sandbox_status"]) == (0.0, False, "policy_rejected")


def _result(requests: list[RequestRecord], **kw) -> ProgramResult:
    denials = kw.pop("denials", [])
    fields = {"returncode": 0, "timed_out": False, "wall_ms": 1000.0, "stdout": "", "stderr": ""}
    return ProgramResult(
        **{**fields, **kw}, requests=requests, denials=denials, workspace=Path(".")
    )


def test_failures_are_put_down_to_their_cause():
    ok = RequestRecord(0.0, 0.5, 200, False, 100, 10, 20, "timings")
    bad = RequestRecord(0.0, 0.1, 502, False, error="connection refused")
    assert classify(_result([ok]), True, ["x"]) == (None, "")
    assert classify(_result([ok], timed_out=True), False, [])[0] == "timeout"
    assert classify(_result([ok], denials=["network blocked: example.com"]), False, ["x"]) == (
        "sandbox",
        "network blocked: example.com",
    )
    assert classify(_result([bad]), False, []) == ("endpoint_error", "connection refused")
    assert classify(_result([ok]), False, ["no edit block"]) == ("format", "no edit block")
    assert (
        classify(_result([], stderr="Traceback\nImportError: x"), False, [])[0] == "harness_error"
    )
    assert classify(_result([ok]), False, []) == ("wrong", "the hidden tests failed")


def test_overhead_counts_overlapping_requests_once_and_sums_the_tokens():
    requests = [
        RequestRecord(0.0, 1.0, 200, True, 100, 40, 10, "timings"),
        RequestRecord(0.5, 1.5, 200, True, 300, 100, 30, "timings"),
        RequestRecord(3.0, 3.5, 200, False, 50, 0, 5, "usage"),
    ]
    overhead = Overhead.measure(requests, wall_ms=5000.0, format_failures=1)
    assert overhead.as_dict() == {
        "requests": 3,
        "prompt_tokens": 450,
        "cached_tokens": 140,
        "completion_tokens": 45,
        "wall_ms": 5000.0,
        "model_ms": 2000.0,
        "harness_ms": 3000.0,
        "peak_context": 330,
        "format_failures": 1,
    }
    summary = summarize([overhead.as_dict(), {**overhead.as_dict(), "requests": 1}])
    assert (summary["n"], summary["requests_total"], summary["requests_median"]) == (2, 4.0, 2.0)
