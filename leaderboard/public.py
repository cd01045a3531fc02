"""What of a run's private detail a public page may show (no Django).

Public pages never show endpoint URLs, host names, IP addresses, keys or raw payloads. The
reproduction recipe comes from the launch command and settings, so both are scrubbed here, and
the verifier's notes are reduced to an allowlist of fields the verifier itself writes.
"""

from __future__ import annotations

import re

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"]+", re.IGNORECASE)
_IPV4 = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b")
_IPV6 = re.compile(r"\[?\b(?:[0-9a-f]{1,4}:){2,7}[0-9a-f]{0,4}\b\]?(?::\d+)?", re.IGNORECASE)
# Options whose value names a place or a secret, in both "--opt value" and "--opt=value" forms.
_SECRET_OPTIONS = re.compile(
    r"(?<![\w-])(--?(?:url|host|hostname|base-url|api-base|endpoint|server|api-key|key|token|password"
    r"|hf-token|auth|header|ssl-key-file|ssl-cert-file)(?:=|\s+))(\"[^\"]*\"|'[^']*'|\S+)",
    re.IGNORECASE,
)
_SECRET_ENV = re.compile(
    r"\b([A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|URL|HOST)[A-Z0-9_]*=)(\S+)", re.IGNORECASE
)
_PRIVATE_SETTING = re.compile(r"host|url|endpoint|ip|addr|key|token|secret|password|auth|path")
REDACTED = "‹redacted›"
MAX_COMMAND = 2000


def redact_command(command: str) -> str:
    """The launch command with endpoints, addresses and secrets replaced by a marker."""
    text = (command or "")[:MAX_COMMAND]
    text = _SECRET_OPTIONS.sub(lambda m: m.group(1) + REDACTED, text)
    text = _SECRET_ENV.sub(lambda m: m.group(1) + REDACTED, text)
    text = _URL.sub(REDACTED, text)
    text = _IPV4.sub(REDACTED, text)
    return _IPV6.sub(lambda m: REDACTED if m.group(0).count(":") >= 2 else m.group(0), text)


def public_settings(settings: dict) -> list[tuple[str, str]]:
    """Launch settings as (name, value) pairs, without anything that locates or unlocks a host."""
    pairs = []
    for name, value in sorted((settings or {}).items()):
        if _PRIVATE_SETTING.search(str(name).lower()):
            continue
        if isinstance(value, dict | list):
            continue
        pairs.append((str(name)[:60], redact_command(str(value))[:200]))
    return pairs


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


def verifier_notes(metadata: dict) -> list[tuple[str, str]]:
    """(field, text) pairs from a task's metadata that are safe to show to anyone."""
    notes = []
    for name in NOTE_FIELDS:
        value = (metadata or {}).get(name)
        if value is None or value == "":
            continue
        if isinstance(value, dict):
            parts = [
                f"{key}: {'yes' if item is True else 'no' if item is False else item}"
                for key, item in value.items()
                if isinstance(item, bool | int | float)
            ]
            text = ", ".join(parts)
        elif isinstance(value, bool | int | float | str):
            text = "yes" if value is True else "no" if value is False else str(value)
        else:
            continue
        if text:
            notes.append((name.replace("_", " "), text[:300]))
    return notes
