"""docs/architecture.md names code by dotted path (`lab.dispatch.send_job`): each must exist, so
the page cannot drift from the code it describes."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from worker.rules.protocol import RUN_JOB_TASK

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
# `package.module.name` in backticks; file names (`test_x.py`, `worker/agent/`) are not code.
DOTTED = re.compile(r"`([a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`")
FILE_SUFFIXES = (".py", ".md", ".html", ".json", ".toml", ".yml", ".sh", ".txt")


def _references() -> list[str]:
    found = DOTTED.findall(DOC.read_text())
    return sorted({name for name in found if not name.endswith(FILE_SUFFIXES)})


def _resolves(name: str) -> bool:
    """Whether `name` is a module, or an attribute reached from the longest importable module."""
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def _celery_task_names() -> set[str]:
    """Task names, which messages carry and which need not be Python paths: the site's
    registered tasks and the one it sends to lab agents."""
    from benchloop_site.celery import app

    app.loader.import_default_modules()
    return set(app.tasks) | {RUN_JOB_TASK}


def test_the_document_names_code() -> None:
    assert "lab.dispatch.send_job" in _references()  # the pattern finds what it should


@pytest.mark.parametrize("name", _references())
def test_every_dotted_name_in_the_architecture_doc_exists(name: str) -> None:
    assert _resolves(name) or name in _celery_task_names(), f"{name} names nothing"


def test_a_wrong_name_does_not_resolve() -> None:
    assert not _resolves("lab.tasks.send_job")
    assert not _resolves("lab.no_such_module")
