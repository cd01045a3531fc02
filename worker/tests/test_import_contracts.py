"""The import contracts (.importlinter) hold, and break when they should."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("worker", "lab", "runs", "submissions", "leaderboard", "benchloop_site")
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


def test_an_engine_module_that_imports_the_site_breaks_them(tmp_path: Path) -> None:
    """A copy of the tree where the engine reaches into the site, inside a function (which an
    import at the top would make obvious, and this would not)."""
    for name in PACKAGES:
        shutil.copytree(
            REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "data")
        )
    shutil.copy(REPO / ".importlinter", tmp_path / ".importlinter")
    stats = tmp_path / "worker" / "engine" / "stats.py"
    sneaky = "\n\ndef _sneaky():\n    from runs.models import Run\n\n    return Run\n"
    stats.write_text(stats.read_text() + sneaky)
    result = _lint(tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "BROKEN" in result.stdout and "worker.engine.stats -> runs.models" in result.stdout
