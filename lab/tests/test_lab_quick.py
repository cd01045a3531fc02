"""Quick prompts do not wait behind benchmark jobs: each lab agent answers them from a thread of
its own, even while a job runs, and the pages say what the prompt shares the host with."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from lab import agents, services
from lab.models import BenchmarkJob, QuickPrompt, WorkerHost
from lab.tests.lab import approve, start_worker, wait_for
from worker.agent import prompts

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


@pytest.mark.django_db(transaction=True)
def test_the_agent_answers_in_order_and_the_site_records_the_job_it_shared_the_host_with(
    operator, host, agent_for, monkeypatch
) -> None:
    first, second = _prompt(host, operator), _prompt(host, operator)
    job = services.queue_job(
        requested_by=operator, model="m", endpoint_url=SERVER, pool=host.queue_name
    )
    services.claim_job(job_id=job.pk, host=host)
    answered = []

    def answer(spec, on_progress) -> dict:
        answered.append(spec["id"])
        if spec["id"] == second.pk:
            raise ConnectionResetError("the server went away")
        on_progress(3, 0.5)
        return {"reply": "blue", "ttft_ms": 12.0, "decode_tps": 30.0}

    monkeypatch.setattr(prompts, "answer", answer)
    client = agent_for("lab-4090-a")
    assert prompts.answer_next(client) and prompts.answer_next(client)
    assert answered == [first.pk, second.pk]
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.reply, first.ttft_ms) == ("done", "blue", 12.0)
    assert second.status == "failed" and "ConnectionResetError" in second.error
    assert set(job.shared_with_prompts.values_list("pk", flat=True)) == {first.pk, second.pk}
    page = Client().get(f"/lab/jobs/{job.pk}/").content.decode()
    assert "2 quick prompts answered on this host during the job" in page
    assert prompts.answer_next(client) is False  # nothing left


@pytest.mark.django_db
def test_a_prompt_is_answered_once_and_only_by_its_own_host(operator, lab_hosts) -> None:
    mine, other = lab_hosts[1], lab_hosts[0]
    prompt = _prompt(mine, operator)
    assert agents.claim_prompt(other) is None  # another host never sees it
    spec = agents.claim_prompt(mine)
    assert spec is not None and spec["id"] == prompt.pk and spec["prompt"] == "Hi"
    assert agents.claim_prompt(mine) is None  # claimed: the next look finds nothing
    assert not agents.finish_prompt(
        host=other, prompt_id=prompt.pk, reply="x", ttft_ms=None, decode_tps=None
    )
    assert agents.finish_prompt(
        host=mine, prompt_id=prompt.pk, reply="ok", ttft_ms=1.0, decode_tps=2.0
    )
    assert not agents.fail_prompt(host=mine, prompt_id=prompt.pk, error="late")  # done stays


@pytest.mark.llm
@pytest.mark.django_db(transaction=True)
def test_a_quick_prompt_answers_in_seconds_while_a_job_runs(
    lab_site, tmp_path, operator, alice_key, llm_url, llm_model
) -> None:
    from lab.tests.lab import queue_over_http

    worker = start_worker(tmp_path, "lab-busy", ["cpu.test"], servers=[llm_url], site=lab_site)
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
