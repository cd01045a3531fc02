"""Fault drill: the broker (Redis) restarts while a lab job runs.

The drill owns its Redis (a private redis-server on a free port, no persistence, like the
compose service), so killing it touches neither the shared Redis nor other tests. The site
side of the test (queueing over HTTP) and the real Celery worker both use it as their broker.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab.models import JobEvent
from lab.tests.lab import (
    approve,
    assert_one_clean_attempt,
    finished,
    queue_over_http,
    start_worker,
    wait_for,
)
from worker.engine.testing.xllama_launcher import free_port

pytestmark = [pytest.mark.llm, pytest.mark.drill, pytest.mark.django_db(transaction=True)]
TASKS = ["speed-p128-n256", "speed-p512-n16"]  # the broker dies after the first


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class RedisServer:
    port: int
    log_path: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
                + ["--save", "", "--appendonly", "no", "--daemonize", "no"],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_for(lambda: _ping(self.port), 20, f"redis-server on port {self.port}", interval=0.05)

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would: queued and unacked messages are gone."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=20)


@pytest.fixture
def drill_redis(tmp_path) -> Iterator[RedisServer]:
    server = RedisServer(port=free_port(), log_path=tmp_path / "redis.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()


@contextmanager
def _site_broker(url: str) -> Iterator[None]:
    """Point this process's Celery app (what the site enqueues with) at the drill's Redis."""
    from benchloop_site.celery import app

    def repoint(broker_url: str) -> None:
        # Celery reads $CELERY_BROKER_URL before its own setting. Dropping the pools is what
        # Celery itself does after a fork: they are rebuilt from the new URL on the next publish.
        os.environ["CELERY_BROKER_URL"] = broker_url
        app.conf.broker_url = app.conf.broker_write_url = broker_url
        app._pool = None
        app.amqp._producer_pool = None

    previous = os.environ["CELERY_BROKER_URL"]
    repoint(url)
    try:
        yield
    finally:
        repoint(previous)


def _tasks_ended(worker) -> int:
    return len(
        re.findall(r"Task worker\.run_benchmark_job\[\S+\] (?:succeeded|raised)", worker.log())
    )


def _first_task_done(job_id: int) -> bool:
    return JobEvent.objects.filter(job_id=job_id, kind="task_completed").exists()


def test_a_lab_job_survives_a_redis_restart_and_records_every_event_once(
    lab_site, tmp_path, operator, alice_key, llm_url, llm_model, drill_redis
) -> None:
    job = {"endpoint_url": llm_url, "model": llm_model, "tasks": TASKS, "max_tokens": 16}
    with _site_broker(drill_redis.url):
        worker = start_worker(
            tmp_path,
            "lab-r",
            ["cpu.test"],
            env={"BENCHLOOP_BROKER_URL": drill_redis.url},
            site=lab_site,
        )
        try:
            approve("lab-r")
            # 1. Redis dies mid-job and stays down until the job has finished: the job ends
            #    (its events go to Postgres) even though its completion notice cannot be sent.
            first = queue_over_http(alice_key, **job)
            wait_for(lambda: _first_task_done(first), 120, "the first task", interval=0.05)
            drill_redis.kill()
            wait_for(lambda: finished(first), 180, "job 1 to finish with Redis down")
            # The task publishes its follow-ups after the commit: let it end before Redis is back.
            wait_for(lambda: _tasks_ended(worker) == 1, 60, "the task to return")
            drill_redis.start()

            # 2. The same worker reconnects and still consumes its pool; this time Redis
            #    comes back while the job is still running.
            second = queue_over_http(alice_key, **job)
            wait_for(lambda: _first_task_done(second), 120, "the first task", interval=0.05)
            drill_redis.kill()
            time.sleep(1)
            drill_redis.start()
            wait_for(lambda: finished(second), 180, "job 2 to finish after the restart")
            time.sleep(3)  # let any redelivered message arrive; it must change nothing
        finally:
            worker.stop()
            print(worker.log()[-6000:])  # shown by pytest when the drill fails
    log = worker.log()
    for job_id in (first, second):
        try:
            assert_one_clean_attempt(job_id)
        except AssertionError as exc:
            raise AssertionError(f"job {job_id}: {exc}\n{log[-4000:]}") from exc


def _queued_messages(port: int, queue_key: str) -> int:
    import redis

    client = redis.Redis(port=port)
    # Celery's Redis transport keeps one list per priority step: "pool", "pool\x06\x163", ...
    return sum(client.llen(key) for key in client.keys(f"{queue_key}*"))


@pytest.mark.usefixtures("transactional_db")
def test_a_job_queued_while_the_broker_is_down_is_sent_once_it_is_back(
    drill_redis, operator, broker_key
):
    from datetime import timedelta

    from django.utils import timezone

    from lab import services

    with _site_broker(drill_redis.url):
        drill_redis.kill()
        job = services.queue_job(
            requested_by=operator, model="m", endpoint_url="http://127.0.0.1:9", pool="cpu.drill"
        )
        job.refresh_from_db()
        assert (job.status, job.dispatched_at) == ("queued", None)  # stored, not lost
        drill_redis.start()
        later = timezone.now() + timedelta(seconds=11)
        assert services.reap_stale_jobs(now=later)["resent"] == 1
        job.refresh_from_db()
        assert job.dispatched_at is not None
        assert _queued_messages(drill_redis.port, broker_key("cpu.drill")) == 1
        # Sent once: the next pass finds nothing left to send.
        assert services.reap_stale_jobs(now=later)["resent"] == 0
        assert _queued_messages(drill_redis.port, broker_key("cpu.drill")) == 1


def test_the_api_reads_go_on_while_redis_is_down(drill_redis, client, settings):
    """Redis holds the throttle counters and the page cache: with it down, reads that need
    nothing else still answer (throttles fail open, core/throttling.py), and the
    throttles count again once it is back."""
    redis = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": drill_redis.url}
    settings.CACHES = {"default": redis, "limits": redis}
    assert client.get("/api/v1/leaderboard").status_code == 200
    drill_redis.kill()
    assert client.get("/api/v1/leaderboard").status_code == 200
    drill_redis.start()
    assert client.get("/api/v1/leaderboard").status_code == 200
    import redis

    keys = redis.Redis.from_url(drill_redis.url).keys("*throttle*")
    assert keys, "the counters are written again after the restart"
