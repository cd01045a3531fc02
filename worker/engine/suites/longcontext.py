"""longcontext: find one access code hidden in deterministic filler of ~2K to ~32K tokens.

The filler and the needle are generated from each task's ``metadata`` (target tokens, needle
depth), so the data file stays small while the manifest hash still covers the generated text.
A prompt the server cannot hold is reported as skipped with the server's reason, not failed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...rules.contract import TaskRecord
from ...rules.reasoning import OutputLimits
from ..providers.base import ChatResponse
from .base import RunContext, Suite, Verdict
from .common import finish

CHARS_PER_TOKEN = 4
PLACEHOLDER = "{{CONTEXT}}"
_DECOYS = ("Project Kestrel access code is KS-2291-T.", "Project Lumen access code is LM-8305-R.")


_WORDS = [
    "amber",
    "basin",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "grove",
    "harbor",
    "inlet",
    "juniper",
    "kettle",
    "lantern",
    "meadow",
    "nickel",
    "orchard",
    "pepper",
    "quarry",
    "ridge",
    "saddle",
    "timber",
    "umber",
    "valley",
    "willow",
    "yarrow",
    "zephyr",
]


def filler_line(index: int) -> str:
    # Mostly words: digit runs cost one token per digit in many tokenizers (SmolLM2's filler
    # of tallies came to 2.2 characters a token), while prose stays near 4 in all of them.
    first, second, third = (
        _WORDS[(index * k + c) % len(_WORDS)] for k, c in ((1, 0), (7, 3), (11, 5))
    )
    return (
        f"Ledger entry {index}: the {first} shipment reached the {second} depot, "
        f"and the {third} crates were counted and found in order."
    )


def build_context(target_tokens: int, position: float, needle: str) -> str:
    """Deterministic filler of about ``target_tokens`` tokens, the needle at ``position`` depth.

    Two decoy codes sit at fixed depths so that listing every code-like string cannot pass.
    """
    lines: list[str] = []
    size, index = 0, 0
    while size < target_tokens * CHARS_PER_TOKEN:
        line = filler_line(index)
        lines.append(line)
        size += len(line) + 1
        index += 1
    for depth, decoy in zip((0.2, 0.8), _DECOYS, strict=True):
        lines.insert(round(len(lines) * depth), decoy)
    lines.insert(round(len(lines) * position), needle)
    return "\n".join(lines)


class LongContextSuite(Suite):
    """Expands ``{{CONTEXT}}`` in each task and turns context overflows into skips."""

    # Serial: prompts of up to 32K tokens at once would share the server's KV cache, so whether
    # a prompt fits (a skip) could depend on how many ran beside it.
    parallel_tasks = False

    def effective_tasks(
        self, limits: OutputLimits | None = None, options: Mapping[str, Any] | None = None
    ) -> list[dict]:
        out = []
        for task in super().effective_tasks(limits, options):
            meta = task["metadata"]
            needle = f"Project Aurora access code is {task['validation']['code']}."
            context = build_context(meta["target_tokens"], meta["needle_position"], needle)
            messages = [
                {**m, "content": m["content"].replace(PLACEHOLDER, context)}
                for m in task["messages"]
            ]
            out.append({**task, "messages": messages})
        return out

    def run_task(self, task: dict, ctx: RunContext) -> TaskRecord:
        record = super().run_task(task, ctx)
        # Kept so a prompt the server cut short shows (worker.rules.comparability.task_state).
        record["metadata"] = {
            **record["metadata"],
            "target_tokens": task["metadata"]["target_tokens"],
        }
        error = record.get("error") or ""
        if error and "context" in error.casefold():
            # The server cannot hold this prompt: say so instead of scoring a silent 0.
            record["metadata"] = {
                **record["metadata"],
                "skipped": True,
                "skip_reason": f"prompt exceeds the server's context: {error[:300]}",
                "target_tokens": task["metadata"]["target_tokens"],
            }
            record["execution_ok"] = True
        return record

    def score(self, records: list[TaskRecord]) -> float | None:
        """Mean over the tasks that were not skipped."""
        ran = [r for r in records if not r.get("metadata", {}).get("skipped")]
        return round(sum(r["score"] or 0.0 for r in ran) / len(ran), 2) if ran else 0.0


_CODE = re.compile(r"\b[A-Z]{2}-\d{4}-[A-Z]\b")


def verify(task: dict, response: ChatResponse) -> Verdict:
    """100 only when the answer names the right code and no other code."""
    expected = task["validation"]["code"]
    found = sorted(set(_CODE.findall(response.content.upper())))
    details = {"codes_found": found}
    if found == [expected]:
        return finish(100.0, response, details)
    reason = "several candidate codes" if expected in found else "code not found"
    return finish(0.0, response, {**details, "reason": reason})
