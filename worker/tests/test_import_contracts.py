"""The import contracts (.importlinter) hold, and break when they should."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("worker", "core", "lab", "runs", "submissions", "leaderboard", "benchloop_site")
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT), "--config", str(root / ".importlinter"), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
    )


def test_the_import_contracts_hold() -> None:
    result = _lint(REPO)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def _copy_tree(root: Path) -> None:
    for name in PACKAGES:
        shutil.copytree(
            REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "data")
        )
    shutil.copy(REPO / ".importlinter", root / ".importlinter")


def _sneak(module: Path, statement: str) -> None:
    """Add an import inside a function (which an import at the top would make obvious, and
    this would not)."""
    sneaky = f"\n\ndef _sneaky():\n    {statement}\n\n    return None\n"
    module.write_text(module.read_text() + sneaky)


def test_an_engine_module_that_imports_the_site_breaks_them(tmp_path: Path) -> None:
    """A copy of the tree where the engine reaches into the site."""
    _copy_tree(tmp_path)
    _sneak(tmp_path / "worker" / "engine" / "stats.py", "from runs.models import Run  # noqa")
    result = _lint(tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "BROKEN" in result.stdout and "worker.engine.stats -> runs.models" in result.stdout


def test_an_upward_import_between_the_apps_breaks_them(tmp_path: Path) -> None:
    """A copy of the tree where the data layer reaches up into the public site: the cycle
    runs -> leaderboard -> runs that the layers exist to prevent."""
    _copy_tree(tmp_path)
    _sneak(tmp_path / "runs" / "services.py", "from leaderboard import queries  # noqa")
    result = _lint(tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "site-layers" in result.stdout or "The site in layers" in result.stdout
    assert "runs.services -> leaderboard.queries" in result.stdout


def test_the_lab_and_the_public_site_stay_independent(tmp_path: Path) -> None:
    _copy_tree(tmp_path)
    _sneak(tmp_path / "leaderboard" / "exports.py", "from lab import models  # noqa")
    result = _lint(tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "leaderboard.exports -> lab.models" in result.stdout
