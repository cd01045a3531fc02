"""Sending the lab's Celery tasks by name. The services queue work through here and never
import lab.tasks, whose tasks call the services: no import cycle, and the lab agents' task is
sent the same way as the site's own."""

from __future__ import annotations

from celery import current_app
from django.db import transaction

from worker.rules.protocol import RUN_JOB_TASK

NOTIFY_JOB_FINISHED = "worker.notify_job_finished"
DELIVER_WEBHOOK = "worker.deliver_webhook"
REAP_STALE_JOBS = "worker.reap_stale_jobs"


def send(name: str, *args, **options) -> None:
    current_app.send_task(name, args=args, **options)


def send_on_commit(name: str, *args) -> None:
    """After the transaction commits, so a worker never reads a row that is not there yet."""
    transaction.on_commit(lambda: send(name, *args))


def send_job(job_id: int, *, queue: str, priority: int) -> None:
    """A job for the lab agents of a pool (worker/agent/app.py runs it, over HTTP)."""
    send(RUN_JOB_TASK, job_id, queue=queue, priority=priority, retry=False)
