"""README command 1 on the embedded defaults: SQLite, the filesystem broker, a real worker."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.embedded


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except (OSError, sqlite3.Error):
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def embedded_site(tmp_path: Path, fixtures_dir: Path):
    port = _free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(
        BENCHLOOP_VENV=str(Path(sys.executable).parent.parent),
        PORT=str(port),
        BENCHLOOP_VAR_DIR=str(tmp_path / "var"),
        BENCHLOOP_FIXTURES_DIR=str(fixtures_dir),
    )
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen(
        ["bash", str(REPO / "scripts/serve.sh")],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield {
            "url": f"http://127.0.0.1:{port}",
            "var": tmp_path / "var",
            "env": env,
            "log": tmp_path / "serve.log",
        }
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


def test_serve_script_brings_up_site_and_worker_without_any_server(embedded_site) -> None:
    url = embedded_site["url"]
    status = _wait_for(lambda: _get(f"{url}/healthz")[0] == 200, 120, "the site to answer")
    assert status, embedded_site["log"].read_text()[-2000:]
    assert json.loads(_get(f"{url}/healthz")[1]) == {
        "status": "ok",
        "database": "ok",
        "broker": "ok",
    }
    assert (embedded_site["var"] / "benchloop.sqlite3").exists()
    assert "BenchLoop is starting at http://127.0.0.1:" in embedded_site["log"].read_text()

    assert _get(f"{url}/")[0] == 200
    status, html = _get(f"{url}/leaderboard/")
    assert status == 200
    assert html.count('<td class="num rank">') == 50
    static_status, _ = _get(f"{url}/static/django_htmx/htmx-2.min.js")
    assert static_status == 200

    # Reject the top stack's best run: the stack drops it at once, and the decision enqueues a
    # second refresh through the filesystem broker for the worker process.
    db = sqlite3.connect(embedded_site["var"] / "benchloop.sqlite3", timeout=20)
    stack_id, run_id = db.execute(
        "SELECT s.id, s.best_run_id FROM runs_stack s JOIN runs_run r ON r.id = s.best_run_id "
        "WHERE r.score_scale = 'v3' ORDER BY r.overall_score DESC LIMIT 1"
    ).fetchone()
    code = (
        "from submissions.models import Submission; from submissions.services import "
        f"moderate_submission as m; m(submission=Submission.objects.get(run_id={run_id}), "
        "status='rejected', moderator=None, reason='smoke test')"
    )
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=REPO,
        env=embedded_site["env"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    new_best = _wait_for(
        lambda: (
            (
                db.execute(
                    "SELECT best_run_id, stats_refreshed_at FROM runs_stack WHERE id = ?",
                    (stack_id,),
                ).fetchone()
                or (run_id,)
            )[0]
            != run_id
            or None
        ),
        60,
        "the worker to refresh the stack",
    )
    assert new_best
    # The decision refreshed the stack itself; the worker must still run the refresh it
    # enqueued through the filesystem broker.
    assert _wait_for(
        lambda: (
            "runs.refresh_stack_stats" in (log := embedded_site["log"].read_text())
            and "succeeded" in log
            or None
        ),
        60,
        "the worker to run the enqueued refresh",
    )
