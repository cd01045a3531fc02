"""The harness matrix's names, for every app that needs them (the site's side of issue 19).

A matrix run is one stack (the harness is part of a stack's identity) run on the matrix suites:
repository bug fixes, multi-step tool use in a workspace, one long-horizon task. A harness is
``raw`` (the engine's own loop, the baseline), a prompt format, or a real agent program.
"""

from __future__ import annotations

from worker.rules.harnesses import FORMATS, LEGACY_NAMES, PROGRAM_NAMES, canonical, is_program
from worker.rules.profiles import matrix_suites

MATRIX_SUITES = matrix_suites()
SUITE_LABELS = {
    "matrix_bugfix": "Bug fixes",
    "matrix_tools": "Tool use",
    "matrix_long": "Long task",
}
BASELINE = "raw"
FORMAT_NAMES = tuple(name for name in FORMATS if name != BASELINE)

__all__ = [
    "BASELINE",
    "FORMAT_NAMES",
    "LEGACY_NAMES",
    "MATRIX_SUITES",
    "PROGRAM_NAMES",
    "SUITE_LABELS",
    "canonical",
    "harness_kind",
    "harness_order",
    "is_program",
]


def harness_kind(name: str) -> str:
    """ "baseline", "format" or "program" (an unknown name: "other")."""
    if name == BASELINE:
        return "baseline"
    if name in FORMAT_NAMES:
        return "format"
    return "program" if is_program(name) else "other"


def harness_order(name: str) -> tuple[int, str]:
    """Sort key: raw first, then the prompt formats, then the programs, then anything else."""
    rank = {"baseline": 0, "format": 1, "program": 2}.get(harness_kind(name), 3)
    return rank, name
