"""What of a run's private detail a public page may show (no Django).

Public pages never show endpoint URLs, host names, IP addresses, keys or raw payloads. The
text itself is scrubbed by worker.rules.redact (one implementation for the site and the CLI);
this module decides which fields are shown at all: launch settings without the ones that
locate or unlock a host, and the verifier's notes reduced to an allowlist of the fields the
verifier itself writes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from worker.rules.redact import REDACTED, redact_command, redact_text
from worker.rules.sweeps import cell_status

__all__ = [
    "NOTE_FIELDS",
    "PUBLIC_TASK_COLUMNS",
    "cell_status",
    "reasoning_tokens",
    "REDACTED",
    "public_launch_settings",
    "public_settings",
    "redact_command",
    "redact_text",
    "verifier_notes",
]

# A task result's columns that anyone may read (the API, the run page, the stored rows start
# with them); its error, output and metadata are the owner's and moderators' (the run page shows
# the metadata only through verifier_notes and friends).
PUBLIC_TASK_COLUMNS = (
    "task_id",
    "passed",
    "score",
    "latency_ms",
    "tokens_generated",
    "tokens_prompt",
    "execution_ok",
    "finish_reason",
)

_PRIVATE_SETTING = re.compile(r"host|url|endpoint|ip|addr|key|token|secret|password|auth|path")


def public_launch_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """Launch settings without anything that locates or unlocks a host, text redacted."""
    public: dict[str, Any] = {}
    for name, value in sorted((settings or {}).items()):
        if _PRIVATE_SETTING.search(str(name).lower()) or isinstance(value, dict | list):
            continue
        text = isinstance(value, str)
        public[redact_text(str(name)[:60])] = redact_command(value)[:200] if text else value
    return public


def public_settings(settings: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Launch settings as (name, value) pairs, without anything that locates or unlocks a host."""
    return [(name, str(value)[:200]) for name, value in public_launch_settings(settings).items()]


# Fields the verifiers write about a task (never the model's own words or tool arguments).
NOTE_FIELDS = (
    "evaluation_status",
    "matched_rules",
    "total_rules",
    "checks",
    "agent_components",
    "stop_reason",
    "tool_calls_total",
    "json_extraction_method",
    "selection_method",
    "selected_trial",
    "warmup_dropped",
    "note",
)


def verifier_notes(metadata: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(field, text) pairs from a task's metadata that are safe to show to anyone."""
    notes = []
    for name in NOTE_FIELDS:
        value = (metadata or {}).get(name)
        if value is None or value == "":
            continue
        if isinstance(value, dict):
            parts = [
                f"{redact_text(key)}: {'yes' if item is True else 'no' if item is False else item}"
                for key, item in value.items()
                if isinstance(item, bool | int | float)
            ]
            text = ", ".join(parts)
        elif isinstance(value, bool | int | float | str):
            text = "yes" if value is True else "no" if value is False else str(value)
        else:
            continue
        if text:
            notes.append((name.replace("_", " "), redact_text(text[:300])))
    return notes


def reasoning_tokens(metadata: object) -> int | None:
    """A task's thinking tokens (counted apart from its answer), when it had any."""
    value = (metadata or {}).get("reasoning_tokens") if isinstance(metadata, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 10**9:
        return None
    return value
