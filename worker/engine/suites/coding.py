"""coding verifier: the model's Python runs in the sandbox against the task's hidden tests.

Score = 100 × passing tests / tests (the same partial-credit rule as loop_code_fix); a task
passes only when every test passes. No code, a syntax error or a policy rejection scores 0.
"""

from __future__ import annotations

import re

from ..providers.base import ChatResponse
from ..sandbox import Limits, check_policy, run_python
from .base import Verdict
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


def run_hidden_tests(code: str, tests: list[str]) -> tuple[float, dict]:
    """(score, details) for ``code`` against ``tests`` in the sandbox."""
    if not code:
        return 0.0, {"reason": "missing_code"}
    violations = check_policy(code)
    if violations:
        reason = "syntax_error" if violations[0].startswith("syntax error") else "policy_rejected"
        return 0.0, {"reason": reason, "violations": violations}
    result = run_python(code, tests=tests, limits=LIMITS)
    details = {
        "sandbox_status": result.status,
        "network_isolated": result.network_isolated,
        "stderr": result.stderr[-500:],
    }
    if result.tests is None:
        return 0.0, {**details, "reason": f"no test report ({result.status})"}
    passed, total = result.tests["passed"], result.tests["total"]
    details.update(tests_passed=passed, tests_total=total, failures=result.tests["failures"][:5])
    return 100.0 * passed / total if total else 0.0, details


def verify(task: dict, response: ChatResponse) -> Verdict:
    code = extract_code(response.content)
    score, details = run_hidden_tests(code, task["validation"]["tests"])
    return finish(score, response, details, pass_at=100.0)
