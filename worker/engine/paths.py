"""Where BenchLoop keeps its files: ``$BENCHLOOP_HOME`` or ``~/.bench-loop``."""

from __future__ import annotations

import os
from pathlib import Path


def benchloop_home() -> Path:
    value = os.environ.get("BENCHLOOP_HOME", "").strip()
    return Path(value).expanduser() if value else Path.home() / ".bench-loop"


def runs_dir() -> Path:
    return benchloop_home() / "runs"


def credentials_path() -> Path:
    return benchloop_home() / "credentials.json"
