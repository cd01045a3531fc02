"""The matrix suites' runner: one workspace per task, one harness, a verdict by the parent.

The harness is the run's ``--harness``: a real program (caged, ``runner.run_program``) or our own
loop in one of the prompt formats (``baseline.run_loop``, ``raw`` being the baseline). Either
way the model is reached through the recording proxy, the workspace is judged here afterwards
(hidden checks in the code sandbox, or an answer file's JSON), and the task record carries the
harness's overhead and, for a failure, whether it was the format, the cage or a wrong answer.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any, TypedDict

from ...rules.contract import TaskRecord
from ...rules.harnesses import is_program
from ..sandbox import parse_checks, run_python
from ..suites.base import OUTPUT_LIMIT, RunContext, Suite, task_record
from . import baseline, runner
from .adapters import adapter
from .programs import PROGRAMS
from .spec import HarnessTask, Overhead, ProgramResult, summarize

JUDGE_LIMIT = 64_000


def named_files(task: dict) -> tuple[str, ...]:
    """The files a matrix task names (``config.files``), else its whole workspace."""
    return tuple(task.get("config", {}).get("files") or task["workspace"])


def write_workspace(files: dict[str, str], root: Path) -> None:
    """The task's files under ``root`` (paths are checked by the suite schema)."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _read(workspace: Path, name: str) -> str | None:
    """The workspace file ``name`` (workspace-relative), opened one component at a time with
    no symlink followed: a program that leaves ``out -> /host/dir`` cannot make us read the
    host. None if any component is a symlink, missing, or the file is not a regular file."""
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
        return None
    nofollow = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(workspace, nofollow | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            inner = os.open(part, nofollow | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        # O_NONBLOCK: a FIFO left in the workspace must not hang the judge.
        inner = os.open(parts[-1], nofollow | os.O_NONBLOCK, dir_fd=fd)
        os.close(fd)
        fd = inner
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb") as handle:
            fd = -1  # the handle closes it
            return handle.read(JUDGE_LIMIT).decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def _same(expected: Any, got: Any, tolerance: float) -> bool:
    if isinstance(expected, bool) or isinstance(got, bool):
        return expected is got
    if isinstance(expected, int | float) and isinstance(got, int | float):
        return math.isclose(expected, got, abs_tol=tolerance)
    return bool(expected == got)


def judge(validation: dict, workspace: Path) -> tuple[float, bool, dict]:
    """Score (0-100), passed, and details, from the workspace the harness left behind."""
    if "judge_file" in validation:
        code = _read(workspace, validation["judge_file"])
        if code is None:
            return 0.0, False, {"reason": f"{validation['judge_file']} is missing"}
        checks = parse_checks(validation["checks"])
        result = run_python(code, checks=checks)
        outcomes = result.outcomes or []
        passed = sum(1 for o in outcomes if o.passed)
        details = {"sandbox_status": result.status, "checks_passed": passed, "checks": len(checks)}
        if result.violations:
            details["violations"] = result.violations[:3]
        return round(100.0 * passed / len(checks), 2), passed == len(checks), details
    text = _read(workspace, validation["answer_file"])
    if text is None:
        return 0.0, False, {"reason": f"{validation['answer_file']} is missing"}
    try:
        answer = json.loads(text)
    except ValueError:
        return 0.0, False, {"reason": f"{validation['answer_file']} is not JSON"}
    expected: dict = validation["expect_json"]
    if not isinstance(answer, dict):
        return 0.0, False, {"reason": "the answer is not a JSON object"}
    tolerance = float(validation.get("tolerance", 1e-9))
    right = sum(1 for k, v in expected.items() if k in answer and _same(v, answer[k], tolerance))
    extra = len(set(answer) - set(expected))
    score = 100.0 * right / (len(expected) + extra)
    return round(score, 2), right == len(expected) and not extra, {"keys_right": right}


def classify(
    result: ProgramResult, passed: bool, format_failures: list[str]
) -> tuple[str | None, str]:
    """Why a task failed (one of worker.rules.harnesses.FAILURES), and the reason in words;
    (None, "") for a pass."""
    if passed:
        return None, ""
    if result.timed_out:
        return "timeout", "the harness ran past the task's time limit and was stopped"
    if result.limit_hits:
        return "harness_error", f"the harness hit the cage's limit: {result.limit_hits[0]}"
    if result.denials:
        return "sandbox", result.denials[0]
    answered = [r for r in result.requests if r.status == 200]
    if result.requests and not answered:
        first = result.requests[0]
        return "endpoint_error", first.error or f"the endpoint answered HTTP {first.status}"
    if format_failures:
        return "format", format_failures[0]
    if not result.requests:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        return "harness_error", f"the harness made no model request: {tail[0][:300]}"
    return "wrong", "the hidden tests failed"


class _Bounds(TypedDict):
    """What bounds a harness run, the same for a program and for our loop."""

    max_tokens_cap: int
    timeout_s: float
    api_key: str | None


class MatrixSuite(Suite):
    """A matrix suite: the run's harness works on each task's workspace."""

    # Serial: each task runs a caged program or loop under a wall-clock limit, and its record
    # measures the harness's overhead; tasks beside it would change both.
    parallel_tasks = False

    def run_task(self, task: dict, ctx: RunContext) -> TaskRecord:
        config = task.get("config", {})
        htask = HarnessTask(
            task_id=task["id"],
            prompt=task["messages"][-1]["content"],
            files=named_files(task),
            max_steps=int(config.get("max_steps", 6)),
        )
        cap = int(config.get("max_tokens", 256))
        timeout_s = float(config.get("timeout_s", 240))
        name = ctx.harness
        with tempfile.TemporaryDirectory(prefix="benchloop-matrix-") as tmp:
            workspace = Path(tmp) / "workspace"
            workspace.mkdir()
            write_workspace(task["workspace"], workspace)
            where = (htask, workspace, ctx.endpoint, ctx.model)
            bounds = _Bounds(max_tokens_cap=cap, timeout_s=timeout_s, api_key=ctx.api_key)
            if is_program(name):
                program = adapter(name, ctx.harness_variant)
                result = runner.run_program(program, *where, **bounds)
                failures = program.format_failures(result)
            else:
                result, failures = baseline.run_loop(name, *where, **bounds)
            score, passed, details = judge(task["validation"], workspace)
        overhead = Overhead.measure(result.requests, result.wall_ms, len(failures))
        failure, reason = classify(result, passed, failures)
        return task_record(
            task,
            self.name,
            passed=passed,
            score=score,
            latency_ms=round(result.wall_ms, 3),
            tokens_generated=overhead.completion_tokens,
            tokens_prompt=overhead.prompt_tokens,
            error=reason if failure not in (None, "wrong") else "",
            output=(result.stdout or result.stderr)[-OUTPUT_LIMIT:],
            execution_ok=failure not in ("harness_error", "endpoint_error", "timeout"),
            metadata={
                "verdict": details,
                "overhead": overhead.as_dict(),
                "failure": failure,
                "failure_reason": reason[:500],
                "denials": [d[:300] for d in result.denials[:5]],
                "limit_hits": [h[:300] for h in result.limit_hits[:5]],
                "format_failures": [f[:300] for f in failures[:5]],
                "max_tokens_per_request": cap,
            },
        )

    def summary(self, records: list[TaskRecord], ctx: RunContext) -> dict:
        return suite_metadata(records, ctx.harness, ctx.harness_variant)


def harness_metadata(name: str, variant: str) -> dict:
    """What a matrix suite record says of its harness."""
    spec = PROGRAMS.get(name)
    if spec is None:
        return {"name": name, "package": "", "version": "v1", "variant": variant}
    return {"name": name, "package": spec.package, "version": spec.version, "variant": variant}


def suite_metadata(records: list[TaskRecord], name: str, variant: str) -> dict:
    """The overhead and failure counts of a matrix suite's records."""
    failures: dict[str, int] = {}
    for record in records:
        kind = record["metadata"].get("failure")
        if kind:
            failures[kind] = failures.get(kind, 0) + 1
    return {
        "harness": harness_metadata(name, variant),
        "overhead": summarize([r["metadata"].get("overhead", {}) for r in records]),
        "failures": failures,
    }
