"""What a lab operator reads on the job and host pages: liveness, attempts, numbers, ETA,
the cancel button and the notifications a job sent."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from lab import notifications, services
from lab.models import BenchmarkJob, NotificationSettings, WebhookDelivery, WorkerHost
from lab.tests.conftest import approved_host
from lab.tests.test_notifications import Receiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(operator, lab_hosts) -> BenchmarkJob:
    return services.queue_job(
        requested_by=operator, model="qwen3:8b", endpoint_url="http://10.1.2.3:8080", pool="cpu"
    )


@pytest.fixture
def operator_client(operator) -> Client:
    client = Client()
    client.force_login(operator)
    return client


def _run_on(job: BenchmarkJob, host: WorkerHost) -> BenchmarkJob:
    claimed = services.claim_job(job_id=job.pk, host=host)
    services.mark_running(job_id=job.pk, attempt=claimed.attempts)
    return claimed


def test_a_host_silent_past_the_reapers_limit_shows_as_offline(
    operator_client, job, lab_hosts, settings
) -> None:
    cpu = lab_hosts[0]
    running = _run_on(job, cpu)
    page = operator_client.get("/lab/hosts/").content.decode()
    assert page.count(">online</span>") == 2 and ">offline</span>" not in page
    silent = timezone.now() - timedelta(seconds=settings.BENCHLOOP_JOB_STALE_SECONDS + 5)
    WorkerHost.objects.filter(pk=cpu.pk).update(last_heartbeat_at=silent)
    page = operator_client.get("/lab/hosts/").content.decode()
    assert page.count(">online</span>") == 1 and page.count(">offline</span>") == 1
    assert ">offline</span>" in operator_client.get(f"/lab/hosts/{cpu.pk}/").content.decode()
    job_page = Client().get(f"/lab/jobs/{running.pk}/").content.decode()
    assert ">host offline</span> (last heard 1" in job_page  # "1 minute ago"


def test_the_job_page_groups_the_events_of_every_attempt(job, lab_hosts) -> None:
    first = _run_on(job, lab_hosts[0])
    services.record_event(
        job_id=job.pk, attempt=1, seq=1, event={"type": "log", "message": "from attempt one"}
    )
    stale = timezone.now() - services.STALE_AFTER - timedelta(seconds=1)
    BenchmarkJob.objects.filter(pk=job.pk).update(heartbeat_at=stale)
    assert services.reap_stale_jobs()["requeued"] == 1
    second = _run_on(first, lab_hosts[0])
    assert second.attempts == 2
    services.record_event(
        job_id=job.pk, attempt=2, seq=1, event={"type": "log", "message": "from attempt two"}
    )
    page = Client().get(f"/lab/jobs/{job.pk}/").content.decode()
    assert "Attempt 2 (current)" in page and "Attempt 1<" in page
    two, one = page.index("Attempt 2 (current)"), page.index("Attempt 1<")
    assert two < page.index("from attempt two") < one < page.index("from attempt one")
    assert "stopped responding" in page[one:]  # the reaper's note stays with attempt 1


def test_the_job_page_shows_the_thinking_budget_or_automatic(job) -> None:
    page = Client().get(f"/lab/jobs/{job.pk}/").content.decode()
    assert "3 speed trials · thinking budget automatic · queued" in page
    assert "answer limit" not in page
    BenchmarkJob.objects.filter(pk=job.pk).update(thinking_budget=0, max_tokens=48)
    page = Client().get(f"/lab/jobs/{job.pk}/").content.decode()
    assert "· answer limit 48 tokens · thinking budget 0 tokens ·" in page
    assert "automatic" not in page


def test_the_cancel_button_leaves_the_polled_fragment_once_the_job_is_final(
    operator_client, job
) -> None:
    htmx = {"HX-Request": "true"}
    assert "Cancel job" in operator_client.get(f"/lab/jobs/{job.pk}/", headers=htmx).text
    assert "Cancel job" not in Client().get(f"/lab/jobs/{job.pk}/").text  # not anyone's
    BenchmarkJob.objects.filter(pk=job.pk).update(status="succeeded", finished_at=timezone.now())
    final = operator_client.get(f"/lab/jobs/{job.pk}/", headers=htmx)
    assert final.status_code == 286 and "Cancel job" not in final.text
    assert "Cancel job" not in operator_client.get(f"/lab/jobs/{job.pk}/").text


def test_trial_events_show_their_numbers_and_the_page_an_eta(job, lab_hosts) -> None:
    _run_on(job, lab_hosts[0])
    trial = {"type": "trial_completed", "suite": "speed", "task_id": "speed-p128-n256"}
    services.record_event(
        job_id=job.pk,
        attempt=1,
        seq=1,
        event=trial
        | {"trial": 2, "ok": True, "decode_tps": 41.26, "ttft_ms": 182.4}
        | {"prefill_tps": 950.2},
    )
    services.record_event(job_id=job.pk, attempt=1, seq=2, event=trial | {"trial": 3, "ok": False})
    started = timezone.now() - timedelta(minutes=10)
    BenchmarkJob.objects.filter(pk=job.pk).update(
        started_at=started, total_tasks=4, completed_tasks=1
    )
    page = Client().get(f"/lab/jobs/{job.pk}/").content.decode()
    assert "speed-p128-n256 trial 2: decode 41.3 tok/s, prefill 950 tok/s, TTFT 182 ms" in page
    assert "speed-p128-n256 trial 3: failed" in page
    job.refresh_from_db()
    # 10 minutes for one task of four: 30 more.
    assert abs((job.eta_at - timezone.now()) - timedelta(minutes=30)) < timedelta(seconds=5)
    assert "in about 29\xa0minutes" in page or "in about 30\xa0minutes" in page
    assert "(1 of 4 tasks in 10\xa0minutes)" in page


def test_cancelling_a_queued_job_notifies_and_the_page_shows_the_delivery(
    operator, operator_client, job, monkeypatch, django_capture_on_commit_callbacks, settings
) -> None:
    from lab import dispatch

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    operator.email = "op@example.org"
    operator.save()
    receiver = Receiver()
    NotificationSettings.objects.create(user=operator, webhook_url=receiver.url)
    # The tasks run here, in order, as a worker would run them.
    local = {
        dispatch.NOTIFY_JOB_FINISHED: notifications.notify_finished,
        dispatch.DELIVER_WEBHOOK: notifications.deliver,
    }
    monkeypatch.setattr(dispatch, "send", lambda name, *args, **options: local[name](*args))
    try:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            response = operator_client.post(f"/lab/jobs/{job.pk}/cancel/")
    finally:
        receiver.close()
    assert response.status_code == 302 and len(callbacks) == 1
    assert [json.loads(body)["event"] for _, body in receiver.requests] == ["job.cancelled"]
    assert mail.outbox[0].subject.startswith(f"BenchLoop job {job.pk} cancelled")
    delivery = WebhookDelivery.objects.get()
    page = operator_client.get(f"/lab/jobs/{job.pk}/").content.decode()
    assert "Webhook deliveries" in page and ">delivered</span>" in page
    assert "HTTP 204 · 1 attempt ·" in page
    assert delivery.delivered_at.strftime("%Y-%m-%d %H:%M") in page
    public = Client().get(f"/lab/jobs/{job.pk}/").content.decode()
    assert "Webhook deliveries" not in public and receiver.url not in public


def test_a_failed_delivery_shows_its_error_and_attempts(operator, operator_client, job) -> None:
    WebhookDelivery.objects.create(
        job=job,
        url="https://hooks.example.org/x",
        payload={},
        attempts=3,
        last_status=503,
        last_error="receiver answered 503",
    )
    page = operator_client.get(f"/lab/jobs/{job.pk}/").content.decode()
    assert ">not delivered</span>" in page and "HTTP 503 · 3 attempts" in page
    assert "receiver answered 503" in page


def test_an_offline_host_is_named_in_the_new_job_warning_only_when_all_are(lab_hosts) -> None:
    approved_host("lab-cpu-2", ["cpu"])
    WorkerHost.objects.filter(name="lab-cpu").update(last_heartbeat_at=None)
    placement = services.place_job(fields={"pool": "cpu"})
    assert placement.warning == "" and len(placement.hosts) == 2
