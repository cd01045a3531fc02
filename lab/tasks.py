"""The site's Celery tasks of the lab queue (each takes ids and calls services), and the send
of a job to the lab agents' queues."""

from __future__ import annotations

from celery import current_app, shared_task

from lab import services
from worker.agent.protocol import RUN_JOB_TASK


def send_job(job_id: int, *, queue: str, priority: int) -> None:
    """Put a job on a pool's queue for the lab agents (worker/agent/app.py runs it, over HTTP:
    the task is theirs, only its name is shared)."""
    current_app.send_task(RUN_JOB_TASK, args=(job_id,), queue=queue, priority=priority, retry=False)


@shared_task(name="worker.reap_stale_jobs", soft_time_limit=120, time_limit=150)
def reap_stale_jobs() -> dict:
    return services.reap_stale_jobs()


@shared_task(name="worker.notify_job_finished", soft_time_limit=60, time_limit=90)
def notify_job_finished(job_id: int) -> None:
    from lab.notifications import notify_finished

    notify_finished(job_id)


@shared_task(
    name="worker.deliver_webhook", bind=True, max_retries=6, soft_time_limit=60, time_limit=90
)
def deliver_webhook(self, delivery_id: int) -> str:
    from lab.notifications import WebhookFailed, deliver

    try:
        return deliver(delivery_id)
    except WebhookFailed as exc:
        # 2, 4, 8, … seconds: a receiver that is briefly down still gets the event.
        raise self.retry(exc=exc, countdown=2 ** (self.request.retries + 1)) from exc
