"""Where BenchLoop keeps its files: ``$BENCHLOOP_HOME`` or ``~/.bench-loop``, and the folder-safe
names of what it keeps there."""

from __future__ import annotations

import os
import re
from pathlib import Path


def benchloop_home() -> Path:
    value = os.environ.get("BENCHLOOP_HOME", "").strip()
    return Path(value).expanduser() if value else Path.home() / ".bench-loop"


def runs_dir() -> Path:
    return benchloop_home() / "runs"


def credentials_path() -> Path:
    return benchloop_home() / "credentials.json"


def slug(text: str) -> str:
    """Folder-safe form of a model id (path-like ids keep only their file name)."""
    base = os.path.basename(text.rstrip("/\\")) if re.search(r"[/\\]", text) else text
    return re.sub(r"[^A-Za-z0-9._-]+", "-", base).strip("-") or "model"
