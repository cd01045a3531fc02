"""The run profiles (speed, smoke, core, full, speed-deep, matrix): their data file is the rules'
own (data/profiles.json). The engine validates it against its schema when it loads it
(worker.engine.suites.load_profiles); the site reads names from it here."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

PROFILES_FILE = Path(__file__).with_name("data") / "profiles.json"
MATRIX_PROFILE = "matrix"


@cache
def _document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(PROFILES_FILE.read_text())
    return document


def profile_names() -> tuple[str, ...]:
    """Every profile's name, in the data file's order."""
    return tuple(_document()["profiles"])


def matrix_suites() -> tuple[str, ...]:
    """The matrix suites, in the matrix profile's order (the site's columns)."""
    return tuple(_document()["profiles"][MATRIX_PROFILE]["suites"])
