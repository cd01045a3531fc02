"""The web process loads the engine's rules (worker.rules) and none of the benchmark runner:
no engine, no lab agent, no CLI (issue 33). .importlinter holds it statically; this holds it for
what a started site really imports, in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUNNER = ("worker.engine", "worker.agent", "worker.cli", "worker.managed", "worker.pull")

# Set up Django, load the URLconf (every view, form and API module) and every template tag
# library, then name the runner's modules that came with them.
PROBE = f"""
import sys
import django

django.setup()
import benchloop_site.urls  # noqa: F401
from django.template import engines

engines["django"].engine.template_libraries
runner = {RUNNER!r}
print("\\n".join(sorted(m for m in sys.modules if m.startswith(runner))))
"""


def test_the_site_imports_no_module_of_the_benchmark_runner() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "benchloop_site.settings"}
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = result.stdout.split()
    assert not loaded, "the site loaded the runner's modules:\n" + "\n".join(loaded)
