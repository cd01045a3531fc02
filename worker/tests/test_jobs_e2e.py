"""The lab queue end to end: HTTP, Redis, real Celery workers, Postgres and a real llama.cpp."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.models import Run
from runs.services import refresh_stack_stats
from worker.models import JobEvent
from worker.tests.lab import approve, finished, queue_over_http, smollm_gguf, start_worker, wait_for

pytestmark = [pytest.mark.llm, pytest.mark.django_db(transaction=True)]
TASK = ["task_started", "trial_completed", "task_completed"]
EVENT_ORDER = ["run_started", "suite_started", *TASK, *TASK, "suite_completed", "run_completed"]


def test_an_endpoint_job_runs_on_a_real_worker_and_publishes_a_verified_run(
    tmp_path, operator, alice_key, llm_url, llm_model
) -> None:
    worker = start_worker(tmp_path, "lab-a", ["cpu.test"], servers=[llm_url])
    try:
        host = approve("lab-a")
        job_id = queue_over_http(alice_key, endpoint_url=llm_url, model=llm_model)
        job = wait_for(lambda: finished(job_id), 240, "the job to finish")
        assert job.status == "succeeded", (job.error, worker.log()[-3000:])
    finally:
        worker.stop()
    kinds = list(
        JobEvent.objects.filter(job_id=job_id, attempt=1)
        .order_by("seq")
        .values_list("kind", flat=True)
    )
    assert kinds == EVENT_ORDER
    seqs = list(JobEvent.objects.filter(job_id=job_id).values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert job.host == host and job.attempts == 1
    assert (job.completed_tasks, job.total_tasks) == (2, 2)
    run = Run.objects.get(pk=job.run_id)
    assert run.is_verified and run.published
    assert run.submission.channel == "lab" and run.submission.status == "approved"
    assert run.hardware is not None  # the lab host's own hardware
    host.refresh_from_db()
    assert host.hardware_info["cpu_model"] and host.hardware.ram_gb
    assert host.inventory[0]["models"] == [llm_model]
    refresh_stack_stats(stack_ids=[run.stack_id])
    board = Client().get("/api/v1/leaderboard?scale=v3&comparable=all&verified=1").json()
    assert run.id in [row["id"] for row in board["results"]]


def test_a_managed_llama_cpp_recipe_is_started_and_stopped_by_the_worker(
    tmp_path, operator, alice_key
) -> None:
    worker = start_worker(tmp_path, "lab-m", ["cpu.test"])
    try:
        approve("lab-m")
        job_id = queue_over_http(
            alice_key,
            target="managed",
            model="smollm2-managed",
            model_path=smollm_gguf(),
            context_length=2048,
            threads=2,
            launch_flags=["--no-repack"],
        )
        job = wait_for(lambda: finished(job_id), 240, "the managed job to finish")
        assert job.status == "succeeded", (job.error, worker.log()[-3000:])
    finally:
        worker.stop()
    messages = [
        e.payload.get("message", "") for e in JobEvent.objects.filter(job_id=job_id, kind="log")
    ]
    assert messages[0].startswith("starting llama-server with SmolLM2-135M-Instruct")
    assert "managed llama.cpp server is healthy" in messages
    assert messages[-1] == "stopped the managed llama.cpp server"
    run = Run.objects.get(pk=job.run_id)
    assert run.stack.engine == "llama.cpp" and run.is_verified
