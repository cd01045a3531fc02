"""Pinned, isolated installs of the harness programs (one virtualenv each, like pipx).

A program's own dependencies (Aider pins dozens) never meet the CLI's: each lives in
``$BENCHLOOP_HARNESS_DIR/<package>-<version>`` (default ``~/.cache/benchloop/harnesses``), made
by ``benchloop harness install NAME`` from PyPI at the version in ``programs.PROGRAMS``. The CLI's
extras (``pip install 'benchloop[harness-aider]'``) install the same pins into the CLI's own
environment instead, for whoever prefers that; the program is then found on the CLI's ``bin/``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ..errors import UsageError
from .cage import HarnessNotInstalled, harness_prefix, install_dir
from .spec import HarnessSpec


def program_path(spec: HarnessSpec) -> Path | None:
    """The installed program: the isolated install first, else the CLI's own environment."""
    try:
        return install_dir(spec) / "bin" / spec.program
    except HarnessNotInstalled:
        return None


def require(spec: HarnessSpec) -> Path:
    """The program's path, or a UsageError that says how to install it."""
    path = program_path(spec)
    if path is None:
        raise UsageError(
            f"{spec.name} is not installed",
            hint=f"Run `benchloop harness install {spec.name}` ({spec.package}=={spec.version} "
            f"in its own virtualenv), or pip install 'benchloop[{spec.extra}]'.",
        )
    return path


def install(spec: HarnessSpec, *, python: str = sys.executable, quiet: bool = True) -> Path:
    """Create (or complete) the isolated install of ``spec``; returns the program's path."""
    prefix = harness_prefix(spec)
    if not (prefix / "bin" / "python").exists():
        prefix.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([python, "-m", "venv", str(prefix)], check=True)
    pip = [str(prefix / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, *(["-q"] if quiet else []), f"{spec.package}=={spec.version}"], check=True
    )
    return require(spec)
