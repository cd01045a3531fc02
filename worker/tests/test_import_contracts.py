"""The import contracts (.importlinter) hold, and break when they should."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
    _sneak(tmp_path / "worker" / "engine" / "metrics.py", "from runs.models import Run  # noqa")
    result = _lint(tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "BROKEN" in result.stdout and "worker.engine.metrics -> runs.models" in result.stdout


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


def test_a_site_module_that_imports_the_runner_breaks_them(tmp_path: Path) -> None:
    """Of worker, the site may import worker.rules only: the engine, even inside a function
    and even through another app, breaks the contract."""
    _copy_tree(tmp_path)
    _sneak(tmp_path / "runs" / "figures.py", "from worker.engine import metrics  # noqa")
    result = _lint(tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "runs.figures -> worker.engine.metrics" in result.stdout
    # The public site reaches it through runs.figures: an indirect import counts too.
    assert "leaderboard is not allowed to import worker" in result.stdout


@pytest.mark.parametrize(
    "sneaks",
    [
        # The rules reaching the engine, or a subprocess.
        {
            "worker/rules/stats.py": "from worker.engine import errors",
            "worker/rules/redact.py": "import subprocess",
        },
        # The engine or the agent reaching a front end (the worker's layers).
        {
            "worker/engine/metrics.py": "from worker.cli import run",
            "worker/agent/jobs.py": "from worker.cli import listing",
        },
    ],
    ids=["rules-stand-alone", "worker-layers"],
)
def test_an_import_across_worker_s_rooms_breaks_them(tmp_path: Path, sneaks: dict) -> None:
    _copy_tree(tmp_path)
    for path, line in sneaks.items():
        _sneak(tmp_path / path, f"{line}  # noqa")
    result = _lint(tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    for path, line in sneaks.items():
        importer = path.removesuffix(".py").replace("/", ".")
        words = line.split()
        imported = f"{words[1]}.{words[3]}" if words[0] == "from" else words[1]
        assert f"{importer} -> {imported}" in result.stdout, (importer, imported)


def test_the_untouched_tree_keeps_issue_33_s_four_contracts() -> None:
    """The site imports only the rules, the rules stand alone, worker keeps its layers and has
    no cycles: each contract named, so that dropping one from .importlinter fails here."""
    result = _lint(REPO)
    assert result.returncode == 0, result.stdout[-3000:]
    for name in (
        "site's apps import worker.rules only",
        "worker.rules imports nothing else",
        "worker in layers",
        "No import cycles between the modules of one package of",
    ):
        assert name in result.stdout, name


def test_an_engine_helper_that_imports_the_orchestrator_back_breaks_them(tmp_path: Path) -> None:
    """The orchestrator's helpers take the run's types from worker.engine.plan; reaching back
    into the orchestrator (inside a function, even) makes a cycle."""
    _copy_tree(tmp_path)
    _sneak(
        tmp_path / "worker" / "engine" / "preflight.py",
        "from worker.engine.orchestrator import prepare_run  # noqa",
    )
    result = _lint(tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "No cycles are allowed in worker.engine" in result.stdout
    assert ".preflight -> .orchestrator" in result.stdout or (
        ".orchestrator -> .preflight" in result.stdout
    )
