"""toolcall verifier: tool choice and arguments in one turn, or abstaining when no tool fits.

Task ``validation``:

- ``required``: list of ``{"name", "args"}``; each is matched separately by name *and* by every
  expected argument (numbers within 1e-6, strings as casefolded substrings, booleans exactly);
- ``required_any``: alternatives, any one of which earns full credit;
- ``forbid_tools``: true for abstention tasks (100 for a non-empty text answer and no call).

Penalties, applied after matching: a requirement met only with arguments the tool does not declare
earns half credit; a call to a tool outside the task's allowed tools caps the score at 50; a prose
answer where a call was expected earns 25 at most (it answered, but did not use the tool).
"""

from __future__ import annotations

from ..providers.base import ChatResponse, ToolCall
from .base import Verdict
from .common import finish, normalise

PROSE_CREDIT = 25.0
HALLUCINATION_CAP = 50.0


def _value_matches(expected: object, actual: object) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual if isinstance(expected, bool) else False
    if isinstance(expected, int | float):
        try:
            return abs(float(actual) - float(expected)) <= 1e-6  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
    if actual is None:
        return False
    return normalise(expected) in normalise(actual)


def allowed_tools(task: dict) -> dict[str, set[str]]:
    """Tool name → declared parameter names, from the task's OpenAI-style tool schemas."""
    tools: dict[str, set[str]] = {}
    for tool in task.get("config", {}).get("tools") or []:
        function = tool.get("function", tool)
        tools[function["name"]] = set(function.get("parameters", {}).get("properties", {}))
    return tools


def call_credit(requirement: dict, call: ToolCall, declared: set[str] | None) -> float:
    """1 for an exact match, 0.5 if it also passes undeclared arguments, else 0."""
    if call.name != requirement["name"] or not isinstance(call.arguments, dict):
        return 0.0
    for key, expected in requirement.get("args", {}).items():
        if key not in call.arguments or not _value_matches(expected, call.arguments[key]):
            return 0.0
    extra = set(call.arguments) - declared if declared is not None else set()
    return 0.5 if extra else 1.0


def verify(task: dict, response: ChatResponse) -> Verdict:
    rules = task["validation"]
    calls = response.tool_calls
    tools = allowed_tools(task)
    names = [c.name for c in calls]
    hallucinated = sorted({n for n in names if n not in tools})
    details: dict = {"calls": names, "hallucinated_tools": hallucinated}
    text = response.content.strip()

    if rules.get("forbid_tools"):
        score = 100.0 if not calls and text else 0.0
        details["reason"] = "abstained" if score else ("called a tool" if calls else "empty")
        return finish(score, response, details)

    credits = []
    for requirement in rules.get("required", []):
        declared = tools.get(requirement["name"])
        best = max((call_credit(requirement, c, declared) for c in calls), default=0.0)
        credits.append(best)
    score = 100.0 * sum(credits) / len(credits) if credits else 0.0
    alternatives = rules.get("required_any", [])
    if alternatives:
        any_credit = max(
            (call_credit(r, c, tools.get(r["name"])) for r in alternatives for c in calls),
            default=0.0,
        )
        score = max(score, 100.0 * any_credit)
    details["requirement_credits"] = credits

    if not calls:
        details["reason"] = "prose instead of a tool call" if text else "empty"
        score = PROSE_CREDIT if text else 0.0
    elif hallucinated:
        details["reason"] = "called a tool the task does not offer"
        score = min(score, HALLUCINATION_CAP)
    return finish(score, response, details)
