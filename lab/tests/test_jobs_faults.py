"""Worker death, the reaper, cancellation, host approval and pool routing, with real workers."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from lab import services
from lab.models import BenchmarkJob, JobEvent, WorkerHost
from lab.tests.lab import (
    approve,
    finished,
    queue_over_http,
    start_worker,
    wait_for,
)
from runs.models import Run

pytestmark = [pytest.mark.llm, pytest.mark.django_db(transaction=True)]
ALL_SPEED = ["speed-p128-*", "speed-p512-n16"]
# Two cells: after the first finishes, the long-prompt cell is still to run when its worker dies.
KILL_TASKS = ["speed-p128-*", "speed-p2048-*"]
# The cheapest cell, for jobs whose routing, not their measurements, is the point.
ONE_CELL = ["speed-p512-n16"]


def _status(job_id: int) -> str:
    return BenchmarkJob.objects.get(pk=job_id).status


def test_a_killed_worker_is_replaced_and_the_job_completes_exactly_once(
    lab_site, tmp_path, operator, alice_key, llm_url, llm_model, monkeypatch
) -> None:
    # The same staleness threshold as the workers' (start_worker sets 6 s for them).
    monkeypatch.setattr(services, "STALE_AFTER", timedelta(seconds=6))
    first = start_worker(tmp_path, "lab-k1", ["cpu.test"], site=lab_site)
    try:
        approve("lab-k1")
        job_id = queue_over_http(
            alice_key,
            endpoint_url=llm_url,
            model=llm_model,
            tasks=KILL_TASKS,
            trials=1,
            max_tokens=16,
        )
        wait_for(
            lambda: JobEvent.objects.filter(job_id=job_id, kind="task_completed").exists(),
            120,
            "the first task to finish",
            interval=0.05,
        )
    finally:
        first.kill()  # SIGKILL: no cleanup, no acknowledgement, a stale heartbeat
    assert _status(job_id) == "running"

    second = start_worker(tmp_path, "lab-k2", ["cpu.test"], site=lab_site)
    try:
        approve("lab-k2")

        # Two ways back, both real: Redis redelivers the unacknowledged message after its
        # visibility timeout, and the reaper (beat runs it every 30 s; here, as often as we
        # poll) requeues a job whose heartbeat went stale. Either way the job is claimed again
        # only once the dead worker's heartbeat is stale, and only by one worker.
        def done_or_reap():
            services.reap_stale_jobs()
            return finished(job_id)

        job = wait_for(done_or_reap, 300, "the job to finish on the new worker", interval=1)
        assert job.status == "succeeded", (job.error, second.log()[-3000:])
        time.sleep(3)  # let any duplicate message arrive; it must change nothing
    finally:
        second.stop()
    job.refresh_from_db()
    assert job.attempts == 2 and job.host.name == "lab-k2"
    assert Run.objects.filter(submission__client_run_id=f"lab-job-{job_id}").count() == 1
    second_attempt = list(
        JobEvent.objects.filter(job_id=job_id, attempt=2).values_list("kind", "seq")
    )
    seqs = [seq for _kind, seq in second_attempt]
    assert seqs == list(range(1, len(seqs) + 1))  # no duplicates, no gaps after the claim
    completed = [k for k, _ in second_attempt if k == "task_completed"]
    assert len(completed) == len(KILL_TASKS)  # one cell per pattern, each completed once
    assert [k for k, _ in second_attempt].count("run_completed") == 1


def test_the_reaper_requeues_then_fails_a_job_whose_worker_never_returns(operator) -> None:
    host = WorkerHost.objects.create(
        name="ghost", pools=["nobody.listens"], approved_at=timezone.now()
    )
    job = services.queue_job(
        requested_by=operator,
        model="m",
        endpoint_url="http://127.0.0.1:9",
        pool="nobody.listens",
        max_attempts=2,
    )
    assert services.claim_job(job_id=job.pk, host=host) is not None
    long_ago = timezone.now() - timedelta(minutes=10)
    BenchmarkJob.objects.filter(pk=job.pk).update(status="running", heartbeat_at=long_ago)

    assert services.reap_stale_jobs() == {"requeued": 1, "failed": 0, "resent": 0}
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("queued", 1)

    assert services.claim_job(job_id=job.pk, host=host).attempts == 2
    BenchmarkJob.objects.filter(pk=job.pk).update(heartbeat_at=long_ago)
    assert services.reap_stale_jobs() == {"requeued": 0, "failed": 1, "resent": 0}
    job.refresh_from_db()
    assert job.status == "failed" and "stopped responding" in job.error
    assert services.claim_job(job_id=job.pk, host=host) is None  # final: nobody claims it


def test_a_running_job_is_cancelled_at_the_next_task_boundary(
    lab_site, tmp_path, operator, alice, alice_key, llm_url, llm_model
) -> None:
    worker = start_worker(tmp_path, "lab-c", ["cpu.test"], site=lab_site)
    try:
        approve("lab-c")
        job_id = queue_over_http(
            alice_key,
            endpoint_url=llm_url,
            model=llm_model,
            tasks=ALL_SPEED,
            trials=2,
            max_tokens=16,
        )
        wait_for(
            lambda: JobEvent.objects.filter(job_id=job_id, kind="task_completed").exists(),
            120,
            "a task to finish",
        )
        client = Client()
        client.force_login(alice)
        assert client.post(f"/lab/jobs/{job_id}/cancel/").status_code == 302
        job = wait_for(lambda: finished(job_id), 120, "the job to stop")
    finally:
        worker.stop()
    assert job.status == "cancelled", job.error
    kinds = list(JobEvent.objects.filter(job_id=job_id).values_list("kind", flat=True))
    assert kinds[-1] == "cancelled"
    assert kinds.count("task_completed") < 4  # it did not run to the end
    assert "run_completed" not in kinds and job.run_id is None


def test_a_queued_job_is_cancelled_at_once(operator) -> None:
    job = services.queue_job(
        requested_by=operator, model="m", endpoint_url="http://127.0.0.1:9", pool="nobody.listens"
    )
    services.cancel_job(job=job)
    assert job.status == "cancelled"
    host = WorkerHost.objects.create(name="late", approved_at=timezone.now())
    assert services.claim_job(job_id=job.pk, host=host) is None


def test_an_unapproved_host_gets_no_jobs_and_pools_stay_apart(
    lab_site, tmp_path, operator, alice_key, llm_url, llm_model
) -> None:
    pool_a = start_worker(tmp_path, "lab-pa", ["pool.a"], site=lab_site)
    pool_b = start_worker(tmp_path, "lab-pb", ["pool.b"], site=lab_site)
    try:
        wait_for(
            lambda: WorkerHost.objects.filter(name__in=["lab-pa", "lab-pb"]).count() == 2,
            60,
            "both hosts to register",
        )
        # The API refuses a pool that no approved host serves; a job stored while one was
        # (its host's approval since withdrawn) waits, and no unapproved host takes it.
        waiting = services.queue_job(
            requested_by=operator,
            model=llm_model,
            endpoint_url=llm_url,
            pool="pool.a",
            suites=["speed"],
            tasks=ONE_CELL,
            trials=1,
            max_tokens=24,
        ).pk
        time.sleep(6)  # several heartbeats: an unapproved host must not have touched it
        assert _status(waiting) == "queued"

        approve("lab-pa")
        approve("lab-pb")
        for_b, for_a = (
            queue_over_http(
                alice_key, endpoint_url=llm_url, model=llm_model, pool=pool, tasks=ONE_CELL
            )
            for pool in ("pool.b", "pool.a")
        )
        jobs = [wait_for(lambda j=j: finished(j), 240, "a job") for j in (waiting, for_b, for_a)]
    finally:
        pool_a.stop()
        pool_b.stop()
    assert [j.status for j in jobs] == ["succeeded"] * 3
    assert [j.host.name for j in jobs] == ["lab-pa", "lab-pb", "lab-pa"]
