"""How a speed was measured, and where an imported measurement came from.

A speed is ranked only against speeds of the same method: llama-bench times llama.cpp
in-process on synthetic tokens, llama-benchy and our engine time a server over HTTP, and the
community sources measured in ways of their own. The method is part of a stack's identity
(runs.normalize.stack_identity), so lanes never pool two methods; the board shows one method at
a time. No equivalence between methods is assumed here: bench/README.md records the ratios we
measured, and the methodology page says what they allow.

Django-free: the importers (which parser processes load) and the pages both read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_METHOD = "benchloop-stream"


@dataclass(frozen=True)
class Method:
    key: str
    label: str
    about: str
    # A community source whose rows come in through import_results, not an upload: shown as
    # "imported from <label>, not verified".
    imported: bool = False
    url: str = ""


METHODS: dict[str, Method] = {
    m.key: m
    for m in (
        Method(
            DEFAULT_METHOD,
            "BenchLoop stream",
            "our engine: streamed chat completions over HTTP, timed per token on the client",
        ),
        Method(
            "llama-bench",
            "llama-bench",
            "llama.cpp's own benchmark: in-process, no HTTP, no chat template, synthetic tokens",
            url="https://github.com/ggml-org/llama.cpp/tree/master/tools/llama-bench",
        ),
        Method(
            "llama-benchy",
            "llama-benchy",
            "an OpenAI-endpoint sweep tool: streamed requests over HTTP, timed on the client",
            url="https://pypi.org/project/llama-benchy/",
        ),
        Method(
            "localmaxxing",
            "LocalMaxxing",
            "LocalMaxxing's public leaderboard, as the llmfit repository embeds it; each row is "
            "its submitter's own measurement, method not stated",
            imported=True,
        ),
        Method(
            "llmfit",
            "llmfit community",
            "results shared by llmfit users (`llmfit bench --share`): streamed requests to a "
            "local provider, averaged over the tool's own runs",
            imported=True,
            url="https://github.com/AlexsJones/llmfit",
        ),
        Method(
            "club-5060ti",
            "club-5060ti",
            "a hardware-lane board of RTX 5060 Ti machines: its members' own runs and notes",
            imported=True,
            url="https://github.com/5p00kyy/club-5060ti",
        ),
    )
}
IMPORTED_METHODS = tuple(key for key, m in METHODS.items() if m.imported)


# Our stream's speed method before bundles recorded its version, by the format that carried
# the run: the earlier product's CLIs and speed probe measured with clocks and grids of their
# own, so their speeds are not pooled with today's engine's (bench/README.md "Method
# equivalence" measured only today's).
FORMAT_SPEED_VERSIONS = {
    "run-v3": "cli-0.3",
    "envelope-v3": "cli-0.3",
    "failed-v3": "cli-0.3",
    "run-v2": "cli-0.2",
    "leaderboard-v2": "cli-0.2",
    "leaderboard-v1": "probe",
    "speed-jsonl": "probe",
}


# What a declared version may be (the board's ?bv= accepts the same characters).
_SPEED_VERSION = re.compile(r"[A-Za-z0-9._+-]{1,20}")


def speed_version(method: str, source_format: str, declared: str = "") -> str:
    """The version of the way a run's speed was measured: what our engine's bundle declares
    (worker.rules.scoring.SPEED_METHOD_VERSION), else its format's, else the first ("1");
    "" for other tools' methods, which their method key already names."""
    if (method or DEFAULT_METHOD) != DEFAULT_METHOD:
        return ""
    if declared and _SPEED_VERSION.fullmatch(declared):
        return declared
    return FORMAT_SPEED_VERSIONS.get(source_format, "1")


def speed_version_label(version: str) -> str:
    return f"speed method {version}" if version else "speed method not versioned"


def method_label(key: str) -> str:
    """The method's name for a page; an unknown key (a newer importer's) as it is."""
    found = METHODS.get(key)
    return found.label if found else key


def is_imported(key: str) -> bool:
    found = METHODS.get(key)
    return bool(found and found.imported)


def trust_tier(key: str, *, is_verified: bool) -> str:
    """The words a page puts beside a run's figures about who stands behind them."""
    if is_imported(key):
        return f"imported from {method_label(key)}, not verified"
    return "verified by BenchLoop's lab" if is_verified else "self-reported"


_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")
_PATH = re.compile(r"[A-Za-z0-9_.@+ -]{1,200}(?:/[A-Za-z0-9_.@+ -]{1,200}){0,12}")


def provenance_url(provenance: object) -> str:
    """The source file on GitHub at the commit it was read from, or "" when the provenance
    (stored from an imported file: untrusted) does not name one in a plain form."""
    if not isinstance(provenance, dict):
        return ""
    repository, commit, path = (provenance.get(k) for k in ("repository", "commit", "path"))
    if not (isinstance(repository, str) and isinstance(commit, str) and isinstance(path, str)):
        return ""
    if not (
        _REPOSITORY.fullmatch(repository) and _COMMIT.fullmatch(commit) and _PATH.fullmatch(path)
    ) or ".." in path.split("/"):
        return ""
    return f"https://github.com/{repository}/blob/{commit}/{path}"
