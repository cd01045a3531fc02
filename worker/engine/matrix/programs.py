"""The real harness programs the matrix runs (pure data: nothing of the programs is imported).

Their versions are the CLI's extras' pins (``pyproject.toml``, ``harness-*``): read from the
source tree's pyproject where there is one, else from the installed distribution's metadata.
Every harness's description and recorded version (a prompt format's or a program's) are here, so
that the formats (worker.engine.harnesses) need nothing of the matrix, which builds on them.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from functools import cache
from pathlib import Path

from ...rules.harnesses import FORMAT_DESCRIPTIONS
from .spec import HarnessSpec

_PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"
_PIN = re.compile(
    r"^\s*([A-Za-z0-9_.-]+)\s*==\s*([A-Za-z0-9_.+-]+)\s*(?:;\s*extra\s*==\s*\"([^\"]+)\")?"
)


@cache
def extra_pins() -> dict[str, tuple[str, str]]:
    """``{extra: (package, version)}`` for the CLI's ``harness-*`` extras."""
    requirements: list[tuple[str, str]] = []  # (extra, requirement)
    if _PYPROJECT.is_file():
        extras = tomllib.loads(_PYPROJECT.read_text())["project"]["optional-dependencies"]
        requirements = [(extra, req) for extra, reqs in extras.items() for req in reqs]
    else:
        for req in importlib.metadata.requires("benchloop") or []:
            match = _PIN.match(req)
            if match and match.group(3):
                requirements.append((match.group(3), req))
    pins = {}
    for extra, req in requirements:
        match = _PIN.match(req)
        if extra.startswith("harness-") and match:
            pins[extra] = (match.group(1), match.group(2))
    return pins


def _spec(name: str, extra: str, program: str, description: str) -> HarnessSpec:
    package, version = extra_pins()[extra]
    return HarnessSpec(name, package, version, program, extra, description)


PROGRAMS: dict[str, HarnessSpec] = {
    spec.name: spec
    for spec in (
        _spec("aider", "harness-aider", "aider", "Aider pair-programming CLI"),
        _spec("hermes-agent", "harness-hermes", "hermes", "Hermes Agent (Nous Research)"),
        _spec(
            "mini-swe-agent",
            "harness-mini-swe-agent",
            "mini",
            "mini-swe-agent, a minimal bash-only coding agent",
        ),
    )
}

# The prompt formats' version (worker.engine.harnesses).
HARNESS_VERSION = "v1"
HARNESS_DESCRIPTIONS = FORMAT_DESCRIPTIONS | {
    name: f"the real {spec.description} ({spec.package}=={spec.version}); matrix suites only"
    for name, spec in PROGRAMS.items()
}


def harness_version(name: str) -> str:
    """What the bundle records as the harness's version: the program's pin, else the format's."""
    return PROGRAMS[name].version if name in PROGRAMS else HARNESS_VERSION
