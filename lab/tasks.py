"""Celery tasks of the lab queue; each takes ids and calls services or the job runner."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import OperationalError

from lab import services
from lab.models import BenchmarkJob, WorkerHost

log = logging.getLogger(__name__)


@shared_task(
    name="worker.run_benchmark_job",
    bind=True,
    acks_late=True,
    # Only the named transient failures are retried; everything else fails the job.
    autoretry_for=(OperationalError,),
    max_retries=3,
    retry_backoff=5,
    retry_backoff_max=120,
    soft_time_limit=3 * 3600,
    time_limit=3 * 3600 + 300,
)
def run_benchmark_job(self, job_id: int) -> str:
    from lab.labhost import current_host_name
    from lab.runner import TransientJobError, run_job

    name = current_host_name()
    host = WorkerHost.objects.filter(name=name).first() if name else None
    if host is None:
        log.warning("job %s reached a worker that is not a registered lab host", job_id)
        return "not a lab host"
    try:
        return run_job(job_id=job_id, host=host)
    except TransientJobError as exc:
        job = BenchmarkJob.objects.get(pk=job_id)
        raise self.retry(exc=exc, countdown=min(120, 10 * job.attempts), queue=job.pool) from exc


@shared_task(name="worker.run_quick_prompt", acks_late=True, soft_time_limit=300, time_limit=330)
def run_quick_prompt(prompt_id: int) -> str:
    """Kept for messages an earlier site queued; prompts now have their own consumer in each
    lab worker (lab.quick), and the claim in answer_prompt makes a duplicate harmless."""
    from lab.quick import answer_prompt

    return answer_prompt(prompt_id)


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
