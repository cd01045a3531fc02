"""The CLI is its own install: `pip install .` in a clone (the base distribution, no extras) brings
no Django, DRF, Celery, psycopg or gunicorn, and runs against the real llama.cpp server
(issue 16). The site's dependencies are the `site` extra (README)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SITE_ONLY = {"django", "djangorestframework", "celery", "psycopg", "psycopg-binary", "gunicorn"}
SITE_ONLY |= {"waitress", "whitenoise", "redis", "pillow", "jsonschema-rs", "kombu"}


def _packages() -> list[str]:
    """The top-level packages the distribution ships (pyproject's packages.find)."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    return [pattern.rstrip("*") for pattern in setuptools["packages"]["find"]["include"]]


def _source_copy(target: Path) -> Path:
    """What a checkout holds for the build, without tests or caches (so pip builds nothing in
    the working tree)."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, target / name)
    ignore = shutil.ignore_patterns("__pycache__", "tests", "*.pyc")
    for package in (
        "worker",
        "core",
        "lab",
        "runs",
        "submissions",
        "leaderboard",
        "benchloop_site",
    ):
        shutil.copytree(REPO / package, target / package, ignore=ignore)
    return target


@pytest.mark.llm
def test_the_cli_alone_installs_without_the_site_and_benchmarks_the_real_server(
    tmp_path: Path, llm_url: str, llm_model: str
) -> None:
    (tmp_path / "src").mkdir()
    source = _source_copy(tmp_path / "src")
    venv = tmp_path / "cli-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "PYTHONPATH"))}
    env["BENCHLOOP_HOME"] = str(tmp_path / "home")
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", str(source)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    listing = subprocess.run(
        [str(venv / "bin" / "pip"), "list", "--format=json"], capture_output=True, text=True
    )
    names = {p["name"].lower().replace("_", "-") for p in json.loads(listing.stdout)}
    assert not names & SITE_ONLY, names & SITE_ONLY
    assert {"benchloop", "httpx", "psutil", "nvidia-ml-py", "rich", "jsonschema"} <= names

    cli = str(venv / "bin" / "benchloop")
    away = tmp_path / "elsewhere"  # not the checkout: the installed package must stand alone
    away.mkdir()
    info = subprocess.run(
        [cli, "info", "--json"], cwd=away, env=env, capture_output=True, text=True, timeout=300
    )
    assert info.returncode == 0, info.stderr[-3000:]
    assert json.loads(info.stdout)["hardware"]
    ran = subprocess.run(
        [cli, "run", "--url", llm_url, "--model", llm_model, "--suites", "speed",
         "--tasks", "speed-p128-n256", "--trials", "1", "--max-tokens", "16", "--json"],
        cwd=away, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    bundle = json.loads(Path(json.loads(ran.stdout)["path"]).read_text())
    assert bundle["status"] == "complete" and bundle["suites"]["speed"]["tasks"]

    # The lab agent's install: the `agent` extra adds Celery, and still no Django or driver.
    agent = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", f"{source}[agent]"],
        capture_output=True, text=True, timeout=900, env=env,
    )  # fmt: skip
    assert agent.returncode == 0, agent.stderr[-3000:]
    listing = subprocess.run(
        [str(venv / "bin" / "pip"), "list", "--format=json"], capture_output=True, text=True
    )
    names = {p["name"].lower().replace("_", "-") for p in json.loads(listing.stdout)}
    assert "celery" in names and not names & {"django", "djangorestframework", "psycopg"}
    loaded = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import sys, worker.agent.app as a; print(a.app.main, 'django' in sys.modules)"],
        cwd=away, env={**env, "BENCHLOOP_BROKER_URL": "redis://127.0.0.1:9/0"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert loaded.stdout.split() == ["benchloop-lab-agent", "False"]
