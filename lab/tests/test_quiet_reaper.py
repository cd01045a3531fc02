"""Issue 32: the reaper runs every 30 s; Celery's lines about a run that did nothing are debug, so
the embedded default's terminal (its activation links among them) is not buried. A run that
acted is still said at INFO, by Celery and by the reaper itself."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from lab import services
from lab.dispatch import REAP_STALE_JOBS
from lab.models import BenchmarkJob, WorkerHost
from lab.tasks import reap_stale_jobs

pytestmark = pytest.mark.django_db


def _info_about_the_reaper(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.INFO and ("reap" in r.getMessage())
    ]


def test_an_idle_reaper_is_debug_and_one_that_acts_is_info(caplog, operator) -> None:
    caplog.set_level(logging.INFO)
    # What beat and the worker say before the task runs, as Celery says it.
    logging.getLogger("celery.beat").info(
        "Scheduler: Sending due task %s (%s)", "every-30-seconds-reap-stale-jobs", REAP_STALE_JOBS
    )
    logging.getLogger("celery.worker.strategy").info(
        "Task %(name)s[%(id)s] received", {"name": REAP_STALE_JOBS, "id": "x"}
    )
    # The task itself through Celery's tracer, which logs its answer.
    assert reap_stale_jobs.apply().get() == {"requeued": 0, "failed": 0, "resent": 0}
    assert _info_about_the_reaper(caplog) == []
    # Any other task's lines stay as they were.
    logging.getLogger("celery.worker.strategy").info(
        "Task %(name)s[%(id)s] received", {"name": "runs.refresh_stack_stats", "id": "y"}
    )
    assert "runs.refresh_stack_stats[y] received" in caplog.text

    host = WorkerHost.objects.create(name="ghost", pools=["cpu"], approved_at=timezone.now())
    job = services.queue_job(
        requested_by=operator, model="m", endpoint_url="http://127.0.0.1:9", pool="cpu"
    )
    assert services.claim_job(job_id=job.pk, host=host) is not None
    long_ago = timezone.now() - timedelta(minutes=10)
    BenchmarkJob.objects.filter(pk=job.pk).update(status="running", heartbeat_at=long_ago)
    caplog.clear()
    assert reap_stale_jobs.apply().get()["requeued"] == 1
    said = _info_about_the_reaper(caplog)
    assert "reaper: 1 requeued" in said
    assert any("succeeded" in line and "'requeued': 1" in line for line in said), said
