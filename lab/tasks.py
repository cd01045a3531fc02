"""The site's Celery tasks of the lab queue: each takes ids and calls services. (The lab
agents' own task is in worker/agent/app.py; lab.dispatch sends both by name.)"""

from __future__ import annotations

from celery import shared_task

from lab import dispatch, notifications, services
from worker.rules.logcontext import log_context


@shared_task(name=dispatch.REAP_STALE_JOBS, soft_time_limit=120, time_limit=150)
def reap_stale_jobs() -> dict:
    return services.reap_stale_jobs()


@shared_task(name=dispatch.NOTIFY_JOB_FINISHED, soft_time_limit=60, time_limit=90)
def notify_job_finished(job_id: int) -> None:
    with log_context(job_id=job_id):
        notifications.notify_finished(job_id)


@shared_task(
    name=dispatch.DELIVER_WEBHOOK, bind=True, max_retries=6, soft_time_limit=60, time_limit=90
)
def deliver_webhook(self, delivery_id: int) -> str:
    with log_context(webhook_delivery_id=delivery_id):
        try:
            return notifications.deliver(delivery_id)
        except notifications.WebhookFailed as exc:
            # 2, 4, 8, … seconds: a receiver that is briefly down still gets the event.
            raise self.retry(exc=exc, countdown=2 ** (self.request.retries + 1)) from exc
