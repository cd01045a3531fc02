"""Rules every quality verifier shares: pass threshold, evaluation status and truncation."""

from __future__ import annotations

import json
import re

from ..loops import FINISH_REASON as LOOP_FINISH
from ..providers.base import ChatResponse
from ..reasoning import TRUNCATED_IN_REASONING_HINT, truncated_in_reasoning
from .base import Verdict

PASS_AT = 85.0
PARTIAL_AT = 60.0


def evaluation_status(score: float) -> str:
    if score >= PASS_AT:
        return "pass"
    if score >= PARTIAL_AT:
        return "partial"
    return "fail"


def finish(
    score: float, response: ChatResponse, details: dict, *, pass_at: float = PASS_AT
) -> Verdict:
    """Build the verdict; an answer cut off by ``max_tokens`` is marked truncated and cannot pass.

    The score of what arrived is kept (partial credit stays visible), but ``passed`` is false and
    the status says ``truncated`` so a cut-off answer is never reported as complete, or
    ``truncated_in_reasoning`` (with a hint) when the limit fell before the answer began. An
    answer stopped in a loop (worker.engine.loops) would have run to the limit: it is cut off
    too, with the status ``loop``.
    """
    score = round(max(0.0, min(100.0, float(score))), 2)
    looped = response.finish_reason == LOOP_FINISH
    truncated = response.finish_reason == "length" or looped
    details = {**details, "truncated": truncated, "finish_reason": response.finish_reason}
    details["evaluation_status"] = "truncated" if truncated else evaluation_status(score)
    if looped:
        details["evaluation_status"] = "loop"
    if truncated_in_reasoning(response):
        # Cut off before any answer: a budget too small, not a wrong answer (docs/metrics.md).
        details["truncated_in_reasoning"] = True
        details["evaluation_status"] = "truncated_in_reasoning"
        details["hint"] = TRUNCATED_IN_REASONING_HINT
    return Verdict(score=score, passed=score >= pass_at and not truncated, details=details)


_FENCE = re.compile(r"```[a-zA-Z0-9_+-]*\s*\n(.*?)```", re.DOTALL)


def extract_json(text: str) -> tuple[object, str]:
    """Recover a JSON value: the whole text, a fenced block, then a bracket scan.

    Returns ``(value, method)``; method is ``"none"`` (value None) when nothing parses.
    """
    stripped = text.strip()
    if not stripped:
        return None, "none"
    try:
        return json.loads(stripped), "direct"
    except ValueError:
        pass
    for block in _FENCE.findall(text):
        try:
            return json.loads(block.strip()), "fenced"
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    for index, char in enumerate(text):
        if char in "{[":
            try:
                value, _ = decoder.raw_decode(text, index)
            except ValueError:
                continue
            return value, "bracket_scan"
    return None, "none"


def normalise(text: object) -> str:
    """Casefolded, whitespace-collapsed text for lenient string comparison."""
    return " ".join(str(text).casefold().split())
