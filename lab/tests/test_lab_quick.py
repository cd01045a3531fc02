"""Quick prompts do not wait behind benchmark jobs: each lab worker answers them from its own
consumer, even while a job runs, and the pages say what the prompt shares the host with."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from lab import quick, services
from lab.models import BenchmarkJob, QuickPrompt, WorkerHost
from lab.tests.lab import approve, start_worker, wait_for

SERVER = "http://127.0.0.1:8080"


@pytest.fixture
def operator_client(operator) -> Client:
    client = Client()
    client.force_login(operator)
    return client


@pytest.fixture
def host(lab_hosts) -> WorkerHost:
    return lab_hosts[1]  # lab-4090-a, which reports a server


def _prompt(host, operator) -> QuickPrompt:
    return services.request_quick_prompt(
        host=host, user=operator, server_url=SERVER, model="qwen3-8b-q4", prompt="Hi"
    )


@pytest.mark.django_db
def test_a_prompt_is_not_sent_through_the_benchmark_queue(
    operator_client, host, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        response = operator_client.post(
            f"/lab/hosts/{host.pk}/", {"server": f"{SERVER}|qwen3-8b-q4", "prompt": "Hi"}
        )
    assert response.status_code == 302 and callbacks == []
    assert QuickPrompt.objects.get().status == "queued"


@pytest.mark.django_db
def test_a_waiting_prompt_says_the_host_is_busy_and_when_it_will_be_free(
    operator, operator_client, host
) -> None:
    prompt = _prompt(host, operator)
    idle = operator_client.get(f"/lab/prompts/{prompt.pk}/").content.decode()
    assert "an idle host answers within seconds" in idle
    job = services.queue_job(
        requested_by=operator, model="m", endpoint_url=SERVER, pool=host.queue_name
    )
    services.claim_job(job_id=job.pk, host=host)
    services.mark_running(job_id=job.pk, attempt=1)
    BenchmarkJob.objects.filter(pk=job.pk).update(
        started_at=timezone.now() - timedelta(minutes=20), total_tasks=3, completed_tasks=2
    )
    page = operator_client.get(f"/lab/prompts/{prompt.pk}/", headers={"HX-Request": "true"})
    text = page.content.decode()
    assert page.status_code == 200 and "<html" not in text
    assert f'lab-4090-a is busy with <a href="/lab/jobs/{job.pk}/">job #{job.pk}</a>' in text
    assert "(2 of 3 tasks), free at about" in text
    assert "(in 9\xa0minutes)" in text or "(in 10\xa0minutes)" in text
    WorkerHost.objects.filter(pk=host.pk).update(
        last_heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    offline = operator_client.get(f"/lab/prompts/{prompt.pk}/").content.decode()
    assert "lab-4090-a is offline (last heartbeat 1\xa0hour ago)" in offline


@pytest.mark.django_db
def test_the_consumer_answers_in_order_and_records_the_job_it_shared_the_host_with(
    operator, host, monkeypatch
) -> None:
    first, second = _prompt(host, operator), _prompt(host, operator)
    job = services.queue_job(
        requested_by=operator, model="m", endpoint_url=SERVER, pool=host.queue_name
    )
    services.claim_job(job_id=job.pk, host=host)
    answered = []

    def answer(prompt_id: int) -> str:
        answered.append(prompt_id)
        if prompt_id == second.pk:
            raise ConnectionResetError("the server went away")
        QuickPrompt.objects.filter(pk=prompt_id).update(status="done")
        return "done"

    monkeypatch.setattr(quick, "answer_prompt", answer)
    assert quick.answer_waiting("lab-4090-a") == 2
    assert answered == [first.pk, second.pk]
    second.refresh_from_db()
    assert second.status == "failed" and "ConnectionResetError" in second.error
    assert set(job.shared_with_prompts.values_list("pk", flat=True)) == {first.pk, second.pk}
    page = Client().get(f"/lab/jobs/{job.pk}/").content.decode()
    assert "2 quick prompts answered on this host during the job" in page
    assert quick.answer_waiting("lab-4090-a") == 0  # nothing left


@pytest.mark.django_db
def test_a_prompt_is_answered_once_whoever_finds_it(operator, host, monkeypatch) -> None:
    monkeypatch.setenv("BENCHLOOP_LAB_HOST", "lab-4090-a")
    prompt = _prompt(host, operator)
    QuickPrompt.objects.filter(pk=prompt.pk).update(status="streaming")  # another consumer's
    assert quick.answer_prompt(prompt.pk) == "already answered"


@pytest.mark.llm
@pytest.mark.django_db(transaction=True)
def test_a_quick_prompt_answers_in_seconds_while_a_job_runs(
    tmp_path, operator, alice_key, llm_url, llm_model
) -> None:
    from lab.tests.lab import queue_over_http

    worker = start_worker(tmp_path, "lab-busy", ["cpu.test"], servers=[llm_url])
    try:
        host = approve("lab-busy")
        job_id = queue_over_http(
            alice_key,
            endpoint_url=llm_url,
            model=llm_model,
            tasks=["speed-p128-*", "speed-p512-*"],
            trials=3,
            max_tokens=64,
        )
        wait_for(
            lambda: BenchmarkJob.objects.filter(pk=job_id, status="running").exists(),
            120,
            "the job to run",
        )
        prompt = services.request_quick_prompt(
            host=host, user=operator, server_url=llm_url, model=llm_model, prompt="Name a colour."
        )
        answered = wait_for(
            lambda: QuickPrompt.objects.filter(pk=prompt.pk, status="done").first(),
            90,
            "the reply while the job runs",
        )
        job = BenchmarkJob.objects.get(pk=job_id)
        assert job.status == "running", "the job ended before the prompt was answered"
        assert answered.during_job_id == job_id and answered.reply
        # Seconds after the job's current request, not after the job.
        assert (answered.finished_at - answered.created_at).total_seconds() < 90
        services.cancel_job(job=job)
        wait_for(lambda: BenchmarkJob.objects.get(pk=job_id).is_final, 180, "the cancel")
    finally:
        worker.stop()
