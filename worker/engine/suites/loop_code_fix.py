"""loop_code_fix verifier: the model fixes a buggy module; it runs caged against the checks.

The answer is either the whole fixed file or a unified diff against the module shown in the
prompt. A diff is applied as plain text on the host (no code runs there); a diff that does not
apply scores 0. Score = 100 × checks passed / checks, judged outside the sandbox (see coding);
a task passes only when all checks pass.
"""

from __future__ import annotations

import re

from ..providers.base import ChatResponse
from .base import Verdict
from .coding import extract_code, run_hidden_tests
from .common import finish

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_DIFF_FENCE = re.compile(r"```(?:diff|patch)[^\n]*\n(.*?)(?:```|$)", re.DOTALL | re.IGNORECASE)


def looks_like_diff(text: str) -> bool:
    return bool(re.search(r"^@@ -\d+", text, re.MULTILINE))


def apply_unified_diff(source: str, diff: str) -> str | None:
    """Apply a unified diff; None when a hunk's context or removed lines are not found.

    Hunks are located by content (trailing whitespace ignored), starting from the stated line,
    because models often get the line numbers slightly wrong.
    """
    lines = source.splitlines()
    hunks: list[tuple[int, list[str], list[str]]] = []
    current: tuple[int, list[str], list[str]] | None = None
    for raw in diff.splitlines():
        if raw.startswith(("---", "+++", "diff ", "index ")):
            continue
        match = _HUNK.match(raw)
        if match:
            current = (int(match.group(1)), [], [])
            hunks.append(current)
        elif current is not None:
            if raw.startswith("-"):
                current[1].append(raw[1:])
            elif raw.startswith("+"):
                current[2].append(raw[1:])
            elif raw.startswith(" ") or raw == "":
                current[1].append(raw[1:])
                current[2].append(raw[1:])
            elif raw.startswith("\\"):
                continue
            else:
                return None
    if not hunks:
        return None
    offset = 0
    for start, old, new in hunks:
        # Trailing blank context lines are often lost in copy/paste; don't require them.
        while old and new and old[-1] == "" and new[-1] == "":
            old, new = old[:-1], new[:-1]
        position = _find(lines, old, max(0, start - 1 + offset))
        if position is None:
            return None
        lines[position : position + len(old)] = new
        offset += len(new) - len(old)
    return "\n".join(lines) + "\n"


def _find(lines: list[str], block: list[str], hint: int) -> int | None:
    want = [b.rstrip() for b in block]
    candidates = sorted(range(len(lines) - len(block) + 1), key=lambda i: abs(i - hint))
    for index in candidates:
        if [x.rstrip() for x in lines[index : index + len(block)]] == want:
            return index
    return None


def verify(task: dict, response: ChatResponse) -> Verdict:
    rules = task["validation"]
    text = response.content
    fenced = _DIFF_FENCE.search(text)
    candidate = fenced.group(1) if fenced else extract_code(text)
    details: dict = {"answer_kind": "file"}
    if looks_like_diff(candidate):
        details["answer_kind"] = "diff"
        patched = apply_unified_diff(rules["module"], candidate)
        if patched is None:
            return finish(0.0, response, {**details, "reason": "patch_does_not_apply"})
        candidate = patched
    score, more = run_hidden_tests(candidate.strip(), rules["checks"])
    return finish(score, response, {**details, **more}, pass_at=100.0)
