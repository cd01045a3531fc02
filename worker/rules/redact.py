"""What may be shown to anyone: text with addresses, secrets and personal paths removed.

One implementation for every public surface of the site (run and stack pages, lab job pages,
the job feed and API, notifications, exports, share images, the read API) and for the CLI,
which scrubs an upload with it before it leaves the machine. No Django: the engine imports it.

It removes what locates or unlocks a host or names a person: URLs (with any credentials in
them), `user:password@host`, email addresses, bearer tokens and API-key-like strings (`bl_…`,
`sk-…`, `hf_…`, GitHub and Slack tokens, JWTs, AWS key ids), IPv4 and IPv6 addresses in every
written form (compressed, bracketed, with a zone or port), `host:port`, names under private
DNS suffixes (`.internal`, `.local`, `.lan`, …) and the user's name in home directories
(`/home/<user>`, `/Users/<user>`, `C:\\Users\\<user>`, `~user`). It errs on the side of
removing: a false positive costs a word on a page, a false negative leaks an address.
"""

from __future__ import annotations

import ipaddress
import re

REDACTED = "‹redacted›"
MAX_COMMAND = 2000

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+", re.IGNORECASE)
# "user:secret@host" without a scheme (database DSNs, rsync targets).
_CREDENTIALS = re.compile(r"[\w.%+-]+:[^\s@/'\"]+@[\w.-]+", re.IGNORECASE)
_EMAIL = re.compile(r"[\w.%+-]+@[\w-]+(?:\.[\w-]+)+", re.IGNORECASE)
# A credential after its scheme word; tokens carry digits, prose ("basic information") not.
_BEARER = re.compile(
    r"\b(bearer\s+|basic\s+|authorization:\s*)(?=[\w.~+/=-]*\d)[\w.~+/=-]{8,}", re.IGNORECASE
)
_KEY_LIKE = re.compile(
    r"\b(?:bl_[A-Za-z0-9]{16,}"
    r"|(?:sk|pk|rk|hf|ghp|gho|ghs|ghu|glpat|xox[abpr]|github_pat)[_-](?=[\w-]*\d)[\w-]{20,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|eyJ[\w-]{6,}\.[\w-]{6,}\.[\w-]{6,})"
)
# The user's name in a home directory; the rest of the path (a model's file name) stays.
_HOME = re.compile(
    r"(/home/|/Users/|[A-Za-z]:\\Users\\)(?=\w)[^/\\\s'\"]+|(~)[A-Za-z_][\w.-]*(?=/)"
)
# Candidates only: each is confirmed by the ipaddress module, so "19:00:08" is left alone.
_IPV6 = re.compile(
    r"(?<![\w:.])\[?((?:[0-9a-f]{0,4}:){2,7}[0-9a-f.]*)(%[\w.-]+)?\]?(?::\d{1,5})?(?![\w:])",
    re.IGNORECASE,
)
# Four-part versions that start with 0 ("0.6.0.1") are not host addresses.
_IPV4 = re.compile(r"(?<![\d.])(?!0\.)(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?(?!\d|\.\d)")
# A name with a letter in it, then a port: "gpu-box:11434", "localhost:8080".
_HOST_PORT = re.compile(
    r"(?<![\w.:-])(?=[\w.-]*[a-z])[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?:\d{2,5}(?![\w.:])",
    re.IGNORECASE,
)
_PRIVATE_DNS = re.compile(
    r"\b[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9-]+)*"
    r"\.(?:internal|local|localdomain|lan|corp|home|intranet|private|home\.arpa)\b",
    re.IGNORECASE,
)

# Options whose value names a place or a secret, in both "--opt value" and "--opt=value" forms.
_SECRET_OPTIONS = re.compile(
    r"(?<![\w-])(--?(?:url|host|hostname|base-url|api-base|endpoint|server|rpc|api-key|key|token"
    r"|password|hf-token|auth|header|ssl-key-file|ssl-cert-file|user|username)(?:=|\s+))"
    r"(\"[^\"]*\"|'[^']*'|\S+)",
    re.IGNORECASE,
)
_SECRET_ENV = re.compile(
    r"\b([A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|URL|HOST|AUTH)[A-Z0-9_]*=)(\S+)", re.IGNORECASE
)


# Every pattern above needs one of these; most strings (ids, statuses, prose) have none.
_MAYBE_PRIVATE = re.compile(
    r"[:@/\\~.]|bl_|[a-z]{2,3}[_-][\w-]{15}|bearer|basic|authorization|AKIA|eyJ", re.IGNORECASE
)


def _ipv6(match: re.Match) -> str:
    try:
        ipaddress.IPv6Address(match.group(1))
    except ValueError:
        return match.group(0)
    return REDACTED


def redact_text(text: object) -> str:
    """`text` as a string with every address, secret and personal path replaced."""
    value = "" if text is None else str(text)
    if not _MAYBE_PRIVATE.search(value):
        return value
    value = _URL.sub(REDACTED, value)
    value = _CREDENTIALS.sub(REDACTED, value)
    value = _EMAIL.sub(REDACTED, value)
    value = _BEARER.sub(lambda m: m.group(1) + REDACTED, value)
    value = _KEY_LIKE.sub(REDACTED, value)
    value = _HOME.sub(lambda m: (m.group(1) or m.group(2)) + REDACTED, value)
    if ":" in value:
        value = _IPV6.sub(_ipv6, value)
    value = _IPV4.sub(REDACTED, value)
    value = _HOST_PORT.sub(REDACTED, value)
    return _PRIVATE_DNS.sub(REDACTED, value)


def redact_field(text: object) -> str:
    """redact_text for a stored column: never longer than the original, so a value that fit
    its column still fits once redacted."""
    value = "" if text is None else str(text)
    clean = redact_text(value)
    return clean if len(clean) <= len(value) else clean[: len(value)]


def redact_command(command: str) -> str:
    """A launch command with endpoints, addresses and secrets replaced (also in options and
    environment assignments whose value does not look like an address: `--api-key abc`)."""
    text = (command or "")[:MAX_COMMAND]
    text = _SECRET_OPTIONS.sub(lambda m: m.group(1) + REDACTED, text)
    text = _SECRET_ENV.sub(lambda m: m.group(1) + REDACTED, text)
    return redact_text(text)


def redact_tree(value: object) -> object:
    """Every string (and key) in a JSON-shaped value through redact_text."""
    if isinstance(value, dict):
        return {redact_text(k): redact_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_tree(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
