"""worker/'s tests need no database, no broker and no Django (issue 16): a slice of them, an
engine run against the real llama.cpp server included, passes in a process where Django and the
site's apps cannot be imported, DATABASE_URL is unset and the broker's port is closed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from worker.engine.testing.xllama_launcher import free_port

REPO = Path(__file__).resolve().parents[2]
BLOCKED = ("django", "rest_framework", "psycopg", "benchloop_site", "lab", "runs", "submissions")
BLOCKED += ("leaderboard",)
# Pure functions, bundles and fixtures, the CLI's golden output, and engine runs against the
# real server (the session's llm_server fixture, started in the child).
SLICE = (
    "worker/tests/test_engine_stats.py",
    "worker/tests/test_scoring.py",
    "worker/tests/test_engine_bundle.py",
    "worker/tests/test_redact.py",
    "worker/tests/test_cli_golden.py",
    "worker/tests/test_engine_orchestrator.py::test_forcing_remote_scoring_uses_the_cloud_curve",
)
# A 13 s simulation that the suite runs anyway; it adds nothing here.
SLOW = (
    "worker/tests/test_engine_stats.py::"
    "test_the_ratio_interval_covers_the_true_ratio_95_times_in_100"
)
# The child: an import hook that refuses the site's packages, then pytest without its Django
# plugin (pyproject's addopts name pytest-django's --reuse-db, so they are replaced; the
# DJANGO_SETTINGS_MODULE ini key is then unknown, which pytest would turn into an error).
CHILD = f"""
import sys
import pytest

BLOCKED = {BLOCKED!r}


class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is not importable in worker/'s tests")
        return None


sys.meta_path.insert(0, Refuse())
code = pytest.main(sys.argv[1:])
leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
print("site modules loaded:", leaked)
sys.exit(code if not leaked else 99)
"""


@pytest.mark.llm
def test_worker_tests_pass_without_a_database_a_broker_or_django(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO", "DATABASE", "CELERY", "CACHE", "LIMITS_CACHE", "PYTEST"))
    }
    # Nothing listens there: a test that reached for Redis would fail, not wait.
    env["CELERY_BROKER_URL"] = f"redis://127.0.0.1:{free_port()}/0"
    env["PYTHONPATH"] = str(REPO)
    args = ["-p", "no:django", "-o", "addopts=-p no:cacheprovider --strict-markers"]
    args += ["-W", "ignore::pytest.PytestConfigWarning", "-q", "--basetemp", str(tmp_path / "t")]
    args += ["--deselect", SLOW]
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", CHILD, *args, *SLICE],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = result.stdout[-4000:] + result.stderr[-2000:]
    assert result.returncode == 0, report
    assert "site modules loaded: []" in result.stdout, report
    summary = [line for line in result.stdout.splitlines() if " passed" in line][-1]
    # Every test of the slice ran and passed: a skip could hide one that needs a service.
    assert not any(word in summary for word in ("failed", "error", "skipped")), report
    assert int(summary.split(" passed")[0].split()[-1]) >= 80, report
    print(f"{summary} ({time.monotonic() - started:.0f} s)")
