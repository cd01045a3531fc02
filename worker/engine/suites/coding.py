"""coding verifier: the model's Python runs caged; this process judges the values it computed.

Each task's ``checks`` (``worker/engine/schemas/sandbox-checks-1.schema.json``) name code for
the child to run and, kept here, the value or exception to expect. Score = 100 × checks passed /
checks (the same partial-credit rule as loop_code_fix); a task passes only when every check
passes. No code, a syntax error or a policy rejection scores 0. Where this machine has no OS
sandbox and the user has not opted in, the tasks are refused before the model is asked, and
the record says why. Every verdict records the isolation level it ran under.
"""

from __future__ import annotations

import re

from ...rules.contract import TaskRecord
from ..providers.base import ChatResponse
from ..sandbox import (
    OPT_IN_ENV,
    CheckSpecError,
    Limits,
    check_policy,
    current_isolation,
    parse_checks,
    run_python,
)
from . import SuiteDataError
from .base import RunContext, Suite, Verdict, task_record
from .common import finish

_PY_BLOCK = re.compile(r"```(?:python|py)[^\n]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_ANY_BLOCK = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
_OPEN_BLOCK = re.compile(r"```(?:python|py)?[^\n]*\n(.*)$", re.DOTALL | re.IGNORECASE)

LIMITS = Limits(wall_s=10, cpu_s=5)


def extract_code(text: str) -> str:
    """First ```python block, else the first fenced block, else an unclosed block, else the text."""
    for pattern in (_PY_BLOCK, _ANY_BLOCK, _OPEN_BLOCK):
        found = pattern.search(text)
        if found:
            return found.group(1).strip()
    return text.strip()


def run_hidden_tests(code: str, specs: list[dict]) -> tuple[float, dict]:
    """(score, details) for ``code`` against the task's checks, judged here."""
    sandbox = {"sandbox": current_isolation().as_dict()}  # recorded even when nothing ran
    if not code:
        return 0.0, {**sandbox, "reason": "missing_code"}
    violations = check_policy(code)
    if violations:
        reason = "syntax_error" if violations[0].startswith("syntax error") else "policy_rejected"
        return 0.0, {**sandbox, "reason": reason, "violations": violations}
    checks = parse_checks(specs)
    result = run_python(code, checks=checks, limits=LIMITS)
    details: dict[str, object] = {
        "sandbox_status": result.status,
        "sandbox": result.isolation,
        "stderr": result.stderr[-500:],
    }
    if result.outcomes is None:
        return 0.0, {**details, "reason": f"no checks ran ({result.status})"}
    failures = [f"{i}: {o.note}" for i, o in enumerate(result.outcomes) if not o.passed]
    details.update(tests_passed=result.passed, tests_total=len(checks), failures=failures[:5])
    if not result.loaded:
        details["reason"] = "crash_on_load"
    return 100.0 * result.passed / len(checks), details


def verify(task: dict, response: ChatResponse) -> Verdict:
    code = extract_code(response.content)
    score, details = run_hidden_tests(code, task["validation"]["checks"])
    return finish(score, response, details, pass_at=100.0)


class CodingSuite(Suite):
    """The coding suites' runner: checks are read on load, model code never runs uncaged."""

    def __init__(self, spec: dict):
        super().__init__(spec)
        for task in self.tasks:
            for index, check in enumerate(task["validation"]["checks"]):
                try:
                    parse_checks([check])
                except CheckSpecError as exc:
                    raise SuiteDataError(f"{self.name}: {task['id']} check {index}: {exc}") from exc

    def run_task(self, task: dict, ctx: RunContext) -> TaskRecord:
        cage = current_isolation()
        if not cage.usable:
            # Refused before the model is asked: no inference is spent on an answer that
            # could not be checked safely.
            return task_record(
                task,
                self.name,
                error=(
                    f"sandbox unavailable: {cage.reason}. Model code is not run without one; "
                    f"{OPT_IN_ENV}=1 runs it anyway with only the Python policy and limits."
                ),
                metadata={"error_kind": "sandbox_unavailable", "sandbox": cage.as_dict()},
            )
        return super().run_task(task, ctx)
