"""mypy passes over the project (mypy.ini: every body checked; the contract, the statistics and
scoring, the run's flow and the ranked figures strict), and fails on an emitter that breaks the
typed contract."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MYPY = Path(sys.executable).with_name("mypy")
# Kept between runs (mypy checks what changed: about 0.5 s warm, 10 s cold on two cores).
CACHE = Path(tempfile.gettempdir()) / "benchloop-mypy-cache"


def _mypy(root: Path, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(MYPY), "--config-file", str(root / "mypy.ini"), "--cache-dir", str(cache)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
    )


def _worker_only_config(target: Path) -> None:
    """mypy.ini for a copy of worker/ alone: the real file's sections (the strict ones
    included), checking ``worker`` only and without the Django plugins, whose settings module
    the copy lacks."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(REPO / "mypy.ini")
    config["mypy"]["files"] = "worker"
    config.remove_option("mypy", "plugins")
    for section in config.sections():
        if section.startswith("mypy.plugins."):
            config.remove_section(section)
    with target.open("w") as file:
        config.write(file)


def test_mypy_passes_over_the_project() -> None:
    result = _mypy(REPO, CACHE / "tree")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout


def test_an_event_that_breaks_the_contract_fails_the_check(tmp_path: Path) -> None:
    """A copy of the tree whose task loop (engine.parallel) emits task_started with no task id."""
    shutil.copytree(
        REPO / "worker", tmp_path / "worker", ignore=shutil.ignore_patterns("__pycache__", "data")
    )
    _worker_only_config(tmp_path / "mypy.ini")
    orchestrator = tmp_path / "worker" / "engine" / "parallel.py"
    source = orchestrator.read_text()
    good = 'TaskStarted(type="task_started", suite=suite.name, task_id=task["id"])'
    assert good in source
    orchestrator.write_text(
        source.replace(good, 'TaskStarted(type="task_started", suite=suite.name)')
    )
    result = _mypy(tmp_path, CACHE / "broken")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert 'Missing key "task_id" for TypedDict "TaskStarted"' in result.stdout, result.stdout
