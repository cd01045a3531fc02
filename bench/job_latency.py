"""Lab queue latency: enqueue -> claimed, and task_completed event -> visible on the job page.

Starts everything for real on this machine: a llama.cpp server (xllamacpp, SmolLM2-135M),
gunicorn on a fresh Postgres database, one lab worker on the Redis broker. Then it queues
N small jobs one after another over the HTTP API (so each finds an idle worker) and measures:

- enqueue -> claimed: job.claimed_at - job.created_at (both stamped by the database clock);
- event -> page: from each task_completed row's created_at to the first moment the job page's
  htmx partial (polled every 20 ms) shows it. A browser polls every 2 s, which adds up to 2 s.

Usage: .venv/bin/python bench/job_latency.py [--jobs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DB = "benchloop_jobbench"
BROKER = "redis://127.0.0.1:6379/11"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def html_final_seen(html: str) -> bool:
    return "run_completed" in html or "run_failed" in html


def _database(env: dict[str, str]) -> str:
    """A fresh, migrated database and an empty broker; the API key of a lab operator."""
    from bench.loadlib import fresh_database

    fresh_database(DB)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v", "0"], cwd=REPO, env=env, check=True)
    subprocess.run(["redis-cli", "-n", "11", "flushdb"], check=True, capture_output=True)
    setup = subprocess.run(
        [
            *manage,
            "shell",
            "-c",
            (
                "from django.contrib.auth.models import User, Permission;"
                "from submissions.services import create_api_key;"
                "u = User.objects.create_user('lab', 'lab@example.org', 'x');"
                "u.user_permissions.add(Permission.objects.get(codename='operate_lab'));"
                "print(create_api_key(user=u, name='bench', scopes=['submit'])[1])"
            ),
        ],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return setup.stdout.strip().splitlines()[-1]


def _spawn(argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    """A server in its own process group (stopped with its children at the end)."""
    return subprocess.Popen(
        [sys.executable, "-m", *argv],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _web(env: dict[str, str], port: int) -> subprocess.Popen:
    return _spawn(
        ["gunicorn", "benchloop_site.wsgi:application", "-b", f"127.0.0.1:{port}", "-w", "2"],
        env,
    )


def _lab_worker(env: dict[str, str]) -> subprocess.Popen:
    argv = ["celery", "-A", "benchloop_site", "worker", "-n", "bench@%h", "-Q", "host.bench,celery"]
    argv += ["--concurrency", "1", "--loglevel", "WARNING"]
    host = {"BENCHLOOP_LAB_HOST": "bench", "BENCHLOOP_LAB_POOLS": "cpu.bench"}
    return _spawn(argv, {**env, **host, "BENCHLOOP_LAB_HEARTBEAT": "1"})


def _approved_host_and_client(port: int, key: str) -> httpx.Client:
    """Waits for the worker to register, approves it, and for the site to answer."""
    from lab import services
    from lab.models import WorkerHost

    deadline = time.time() + 120
    while not WorkerHost.objects.filter(name="bench").exists():
        if time.time() > deadline:
            raise SystemExit("the worker never registered")
        time.sleep(0.2)
    services.approve_host(host=WorkerHost.objects.get(name="bench"), user=None)
    time.sleep(3)  # the heartbeat adds the pool's consumer
    http = httpx.Client(
        base_url=f"http://127.0.0.1:{port}",
        timeout=30,
        headers={"Authorization": f"Bearer {key}"},
    )
    for _ in range(100):
        try:
            if http.get("/healthz").status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    return http


def _one_job(http: httpx.Client, llm_url: str, model: str, visible_ms: list[float]) -> float:
    """Queue a job and poll its page until it ends; adds each task's event-to-page time to
    ``visible_ms`` and returns the job's enqueue-to-claimed time."""
    from lab.models import BenchmarkJob, JobEvent

    job_id = http.post(
        "/api/v1/jobs",
        json={
            "model": model,
            "endpoint_url": llm_url,
            "suites": ["speed"],
            "tasks": ["speed-p128-n256", "speed-p512-n16"],
            "trials": 1,
            "max_tokens": 16,
            "pool": "cpu.bench",
        },
    ).json()["id"]
    seen: set[int] = set()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        html = http.get(f"/lab/jobs/{job_id}/", headers={"HX-Request": "true"}).text
        now = datetime.now(UTC)
        for event in JobEvent.objects.filter(job_id=job_id, kind="task_completed"):
            if event.id not in seen and f"/{event.payload['task_id']}:" in html:
                seen.add(event.id)
                visible_ms.append((now - event.created_at).total_seconds() * 1000)
        job = BenchmarkJob.objects.get(pk=job_id)
        # A final page shows at most the newest events; stop once nothing can change.
        if job.is_final and (len(seen) == job.completed_tasks or html_final_seen(html)):
            break
        time.sleep(0.02)
    assert job.status == "succeeded", job.error
    return (job.claimed_at - job.created_at).total_seconds() * 1000


def _figures(values: list[float]) -> dict:
    return {
        "p50": round(percentile(values, 0.5), 1),
        "p95": round(percentile(values, 0.95), 1),
        "n": len(values),
    }


def main() -> None:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20)
    args = parser.parse_args()

    from worker.engine.testing.xllama_launcher import MODEL_ALIAS, start_server

    work = Path(tempfile.mkdtemp(prefix="job-latency-"))
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB}",
        "CELERY_BROKER_URL": BROKER,
        "DEBUG": "True",
        "BENCHLOOP_VAR_DIR": str(work),
    }
    key = _database(env)
    llm = start_server(log_dir=work)
    port = free_port()
    web = _web(env, port)
    worker = _lab_worker(env)
    try:
        import django

        os.environ.update({k: env[k] for k in ("DATABASE_URL", "CELERY_BROKER_URL", "DEBUG")})
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchloop_site.settings")
        django.setup()
        http = _approved_host_and_client(port, key)
        visible_ms: list[float] = []
        claim_ms = [_one_job(http, llm.base_url, MODEL_ALIAS, visible_ms) for _ in range(args.jobs)]
        result = {
            "jobs": args.jobs,
            "machine": f"{os.cpu_count()} CPUs",
            "enqueue_to_claimed_ms": _figures(claim_ms),
            "task_completed_to_page_ms": _figures(visible_ms),
            "median_claim_ms": round(statistics.median(claim_ms), 1),
        }
        print(json.dumps(result, indent=2))
    finally:
        for process in (worker, web):
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
        llm.stop()


if __name__ == "__main__":
    main()
