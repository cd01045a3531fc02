"""Fault drill: Postgres restarted under upload load.

A throwaway Postgres cluster (never the shared one on 5432) behind a real gunicorn. While the
database is down the site answers 503 with a clear message and Retry-After (JSON under /api/,
HTML for pages) and /healthz says so; once it is back the same gunicorn serves uploads again
without a restart, and every accepted upload is stored exactly once with no orphan rows.
"""

from __future__ import annotations

import copy
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import psycopg
import pytest

from worker.engine.testing.xllama_launcher import free_port

pytestmark = pytest.mark.drill
REPO = Path(__file__).resolve().parents[2]
CLIENTS = 3


def _pg_bin(name: str) -> str:
    found = shutil.which(name) or next(
        (str(p) for p in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))), None
    )
    if not found:
        pytest.skip(f"the PostgreSQL server binaries ({name}) are not installed")
    return found


@dataclass
class Cluster:
    """A private Postgres cluster that the drill may stop and start at will."""

    data: Path
    port: int
    as_postgres: list[str]

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/benchloop"

    def ctl(self, *args: str) -> None:
        subprocess.run(
            [*self.as_postgres, _pg_bin("pg_ctl"), "-D", str(self.data), "-w", *args],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1"
        self.ctl("-o", options, "-l", str(self.data / "server.log"), "start")

    def stop(self) -> None:
        # "fast": what a restart by an orchestrator does; open transactions are rolled back.
        self.ctl("-m", "fast", "stop")

    def query(self, sql: str) -> list[tuple]:
        with psycopg.connect(self.url.replace("postgres://", "postgresql://")) as conn:
            return conn.execute(sql).fetchall()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    data = Path(tempfile.mkdtemp(prefix="benchloop-pg-drill-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        user = pwd.getpwnam("postgres")
        os.chown(data, user.pw_uid, user.pw_gid)
        as_postgres = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [*as_postgres, _pg_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]
        + ["-E", "UTF8", "--no-sync"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    db = Cluster(data=data, port=free_port(), as_postgres=as_postgres)
    db.start()
    try:
        with psycopg.connect(
            f"postgresql://postgres@127.0.0.1:{db.port}/postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE benchloop")
        yield db
    finally:
        subprocess.run(
            [*as_postgres, _pg_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]
        )
        shutil.rmtree(data, ignore_errors=True)


def _site_env(db: Cluster) -> dict:
    return {
        **os.environ,
        "DATABASE_URL": db.url,
        # Persistent connections: recovery must come from the health checks, not luck.
        "DATABASE_CONN_MAX_AGE": "60",
        "DEBUG": "True",
        "THROTTLE_UPLOAD": "100000/minute",
        "THROTTLE_USER": "100000/minute",
        "LOG_LEVEL": "WARNING",
    }


@pytest.fixture(scope="module")
def site(cluster: Cluster, tmp_path_factory) -> Iterator[tuple[str, str]]:
    """gunicorn on the migrated cluster, and an upload key for alice there."""
    env = _site_env(cluster)
    python = sys.executable
    subprocess.run(
        [python, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=REPO,
        env=env,
        check=True,
        timeout=300,
    )
    key = subprocess.run(
        [python, "manage.py", "shell", "-c", _CREATE_ALICE],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.split()[-1]
    port = free_port()
    env["SITE_URL"] = f"http://127.0.0.1:{port}"  # the upload answers link to it
    log = tmp_path_factory.mktemp("gunicorn") / "gunicorn.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [python, "-m", "gunicorn", "benchloop_site.wsgi:application"]
            + ["--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "2"]
            + ["--timeout", "60", "--graceful-timeout", "5"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: _get(f"{url}/healthz") == 200, 60, "gunicorn to answer")
        yield url, key
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        print(log.read_text(errors="replace")[-4000:])  # shown by pytest when the test fails


_CREATE_ALICE = """
from django.contrib.auth.models import User
from submissions.services import create_api_key
user = User.objects.create_user("alice", "alice@example.org", "correct horse battery")
print(create_api_key(user=user, name="drill", scopes=["submit", "read"])[1])
"""


def _get(url: str) -> int:
    try:
        return httpx.get(url, timeout=5).status_code
    except httpx.HTTPError:
        return 0


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@dataclass
class Load:
    """Clients that upload distinct runs in a loop and keep every answer."""

    url: str
    key: str
    envelope: dict
    answers: list[tuple[str, float, int, dict, dict]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    _counter: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def payload(self, run_id: str, index: int) -> dict:
        body = copy.deepcopy(self.envelope)
        body["run"]["source_run_id"] = run_id
        # A distinct start time: the same content under a new id would count as a duplicate.
        started = datetime.fromisoformat(body["run"]["timestamp"]) + timedelta(seconds=index)
        body["run"]["timestamp"] = started.isoformat()
        return body

    def upload(self, client: httpx.Client, run_id: str, index: int) -> httpx.Response:
        return client.post(
            f"{self.url}/api/v1/runs",
            json=self.payload(run_id, index),
            headers={"Authorization": f"Bearer {self.key}"},
        )

    def _client_loop(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                with self._lock:
                    self._counter += 1
                    index = self._counter
                run_id = f"drill-{index:05d}"
                try:
                    response = self.upload(client, run_id, index)
                except httpx.HTTPError as exc:  # the site itself must never drop a request
                    self.failures.append(f"{run_id}: {type(exc).__name__}: {exc}")
                    continue
                body = response.json() if "json" in response.headers.get("content-type", "") else {}
                answer = (run_id, time.monotonic(), response.status_code, body, response.headers)
                with self._lock:
                    self.answers.append(answer)
                if response.status_code == 503:
                    time.sleep(0.1)  # a polite client backs off; the drill still hammers

    def start(self) -> list[threading.Thread]:
        threads = [threading.Thread(target=self._client_loop) for _ in range(CLIENTS)]
        for thread in threads:
            thread.start()
        return threads

    def accepted_after(self, moment: float) -> int:
        with self._lock:
            return sum(1 for a in self.answers if a[1] > moment and a[2] in (200, 201))


def test_a_postgres_restart_under_upload_load_answers_503_then_recovers(
    cluster: Cluster, site: tuple[str, str], envelope: dict
) -> None:
    url, key = site
    load = Load(url=url, key=key, envelope=envelope)
    threads = load.start()
    try:
        _wait(lambda: load.accepted_after(0) >= 5, 60, "uploads to be accepted")
        accepted = next(a for a in load.answers if a[2] == 201)
        run_page = accepted[3]["url"]

        cluster.stop()
        down_at = time.monotonic()
        _wait(
            lambda: any(a[2] == 503 and a[1] > down_at for a in load.answers),
            30,
            "an upload to be refused with 503",
        )
        api = httpx.get(f"{url}/api/v1/leaderboard", timeout=10)
        page = httpx.get(run_page, timeout=10)
        health = httpx.get(f"{url}/healthz", timeout=10)
        time.sleep(1)  # keep uploading into the outage

        cluster.start()
        up_at = time.monotonic()
        _wait(lambda: load.accepted_after(up_at) >= 5, 60, "uploads to succeed again")
    finally:
        load.stop.set()
        for thread in threads:
            thread.join(timeout=60)

    assert not load.failures, load.failures[:5]
    # The outage, as a reader of each kind of response sees it.
    assert api.status_code == 503 and api.headers["Retry-After"] == "5"
    assert api.json()["error"]["code"] == "database_unavailable"
    assert "database is unavailable" in api.json()["error"]["message"]
    assert page.status_code == 503 and page.headers["Retry-After"] == "5"
    assert page.headers["content-type"].startswith("text/html")
    assert "temporarily unavailable" in page.text and "database is unavailable" in page.text
    assert health.status_code == 503
    assert health.json()["database"].startswith("error: ") and health.json()["broker"] == "ok"
    assert _get(f"{url}/healthz") == 200

    statuses = {a[2] for a in load.answers}
    assert statuses <= {201, 503}, statuses  # never a 500, a 4xx or a duplicate
    refused = [a for a in load.answers if a[2] == 503]
    assert refused, "the outage refused no upload"
    for _run_id, _at, _status, body, headers in refused:
        assert body["error"]["code"] == "database_unavailable"
        assert headers["Retry-After"] == "5"

    # No answer denied a write that committed: an upload refused with "nothing was saved" is
    # not stored (one refused with "may have been stored" can be either).
    stored = {row[0] for row in cluster.query("SELECT client_run_id FROM submissions_submission")}
    denied = {a[0] for a in refused if "nothing was saved" in a[3]["error"]["message"]}
    assert not denied & stored, sorted(denied & stored)

    # A refused upload is retried as the CLI does, with the same client run id. If its commit
    # landed just before the connection died, the retry finds it (200) instead of adding it.
    with httpx.Client(timeout=30) as client:
        for run_id, *_ in refused:
            retry = load.upload(client, run_id, int(run_id.split("-")[1]))
            assert retry.status_code in (200, 201), retry.text
    sent = {a[0] for a in load.answers}

    rows = cluster.query("SELECT client_run_id, count(*) FROM submissions_submission GROUP BY 1")
    assert {run_id for run_id, _ in rows} == sent
    assert all(count == 1 for _, count in rows)
    # No orphans: a run without its submission, an attempt or a stack without a run.
    assert cluster.query(
        "SELECT count(*) FROM runs_run r"
        " LEFT JOIN submissions_submission s ON s.run_id = r.id WHERE s.id IS NULL"
    ) == [(0,)]
    assert cluster.query("SELECT count(*) FROM runs_run") == [(len(sent),)]
    assert cluster.query("SELECT count(*) FROM submissions_uploadattempt") == [(len(sent),)]
    assert cluster.query(
        "SELECT count(*) FROM runs_stack st"
        " WHERE NOT EXISTS (SELECT 1 FROM runs_run r WHERE r.stack_id = st.id)"
    ) == [(0,)]
