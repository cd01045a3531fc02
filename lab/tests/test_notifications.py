"""Job notifications: email and a signed webhook, delivered by a real worker to a real receiver."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail

from lab import notifications, services
from lab.models import BenchmarkJob, NotificationSettings, WebhookDelivery
from lab.tests.lab import approve, finished, queue_over_http, start_worker, wait_for
from leaderboard.tests.factories import add_runs, record


class Receiver:
    """A loopback HTTP server that records every POST, answering with the next queued status."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.requests: list[tuple[dict, bytes]] = []
        self.statuses = list(statuses or [])
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append((dict(self.headers), body))
                self.send_response(outer.statuses.pop(0) if outer.statuses else 204)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_signatures_verify_and_tampering_is_rejected() -> None:
    body = b'{"event":"job.succeeded","job":{"id":7}}'
    header = notifications.sign("s3cret", body, timestamp=1_800_000_000)
    assert notifications.verify("s3cret", body, header, now=1_800_000_010)
    assert not notifications.verify("s3cret", body.replace(b"7", b"8"), header, now=1_800_000_010)
    assert not notifications.verify("other", body, header, now=1_800_000_010)
    tampered = header[:-1] + ("0" if header[-1] != "0" else "1")
    assert not notifications.verify("s3cret", body, tampered, now=1_800_000_010)
    assert not notifications.verify("s3cret", body, header, now=1_800_000_000 + 301)  # replayed
    assert not notifications.verify("s3cret", body, "garbage", now=1_800_000_010)


@pytest.mark.llm
@pytest.mark.django_db(transaction=True)
def test_each_finished_job_sends_one_signed_webhook_and_an_email(
    lab_site, tmp_path, operator, alice_key, llm_url, llm_model, settings
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    receiver = Receiver()
    prefs = NotificationSettings.objects.create(user=operator, webhook_url=receiver.url)
    worker = start_worker(tmp_path, "lab-w", ["cpu.test"], site=lab_site)
    try:
        approve("lab-w")
        # One cell: the notices, not the measurements, are the point.
        ok = queue_over_http(
            alice_key, endpoint_url=llm_url, model=llm_model, tasks=["speed-p512-n16"]
        )
        broken = queue_over_http(alice_key, endpoint_url=llm_url, model="no-such-model")
        for job_id in (ok, broken):
            wait_for(lambda j=job_id: finished(j), 240, f"job {job_id}")
        wait_for(lambda: len(receiver.requests) >= 2, 60, "two webhook deliveries")
        time.sleep(2)  # a duplicate would arrive now
    finally:
        worker.stop()
        receiver.close()
    assert len(receiver.requests) == 2
    events = {}
    for headers, body in receiver.requests:
        assert notifications.verify(
            prefs.webhook_secret, body, headers[notifications.SIGNATURE_HEADER]
        )
        payload = json.loads(body)
        events[payload["job"]["id"]] = payload
    assert events[ok]["event"] == "job.succeeded" and events[ok]["job"]["run_url"]
    assert events[broken]["event"] == "job.failed"
    assert "no-such-model" in events[broken]["job"]["error"]
    assert set(WebhookDelivery.objects.values_list("last_status", flat=True)) == {204}


@pytest.mark.django_db
def test_a_failing_receiver_is_retried_with_backoff(operator, django_capture_on_commit_callbacks):
    receiver = Receiver(statuses=[500, 503])
    NotificationSettings.objects.create(user=operator, webhook_url=receiver.url)
    job = services.queue_job(
        requested_by=operator, model="m", endpoint_url="http://127.0.0.1:9", pool="nobody.listens"
    )
    job.status, job.error = "failed", "boom"
    job.save()
    delivery = WebhookDelivery.objects.create(
        job=job, url=receiver.url, payload=notifications.job_payload(job)
    )
    try:
        for _ in range(2):
            with pytest.raises(notifications.WebhookFailed, match="answered 50"):
                notifications.deliver(delivery.pk)
        assert notifications.deliver(delivery.pk) == "delivered"
        assert notifications.deliver(delivery.pk) == "already delivered"
    finally:
        receiver.close()
    delivery.refresh_from_db()
    assert (delivery.attempts, delivery.last_status) == (3, 204)
    assert len(receiver.requests) == 3
    from lab.tasks import deliver_webhook

    assert deliver_webhook.max_retries == 6  # 2, 4, 8, … seconds between tries


@pytest.mark.django_db
def test_the_email_names_the_job_and_its_result(operator, settings) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    job = services.queue_job(
        requested_by=operator,
        model="qwen3:8b",
        endpoint_url="http://127.0.0.1:9",
        pool="nobody.listens",
    )
    job.status, job.error = "failed", "unknown model"
    job.save()
    notifications.notify_finished(job.pk)
    [message] = mail.outbox
    assert message.to == ["alice@example.org"]
    assert message.subject == f"BenchLoop job {job.pk} failed: qwen3:8b"
    assert "Reason: unknown model" in message.body


@pytest.mark.django_db
def test_emails_and_webhooks_link_absolutely(operator, settings) -> None:
    """Read in a mail client or by another site, a relative link leads nowhere."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.SITE_URL = "https://bench.example.org"
    job = services.queue_job(
        requested_by=operator, model="m", endpoint_url="http://127.0.0.1:9", pool="nobody.listens"
    )
    run = add_runs(record(), verified=True)[0]
    BenchmarkJob.objects.filter(pk=job.pk).update(status="succeeded", run=run)
    job.refresh_from_db()
    payload = notifications.job_payload(job)["job"]
    assert payload["url"] == f"https://bench.example.org/lab/jobs/{job.pk}/"
    assert payload["run_url"] == f"https://bench.example.org/runs/{run.pk}/"
    notifications.notify_finished(job.pk)
    [message] = mail.outbox
    assert f"Job page: https://bench.example.org/lab/jobs/{job.pk}/" in message.body
    assert f"Verified run: https://bench.example.org/runs/{run.pk}/" in message.body


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/hook",
        "http://localhost/hook",
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata service
        "http://10.0.0.5/hook",
        "http://[::1]/hook",
        "https://192.168.1.1/hook",
        "ftp://example.org/hook",
    ],
)
def test_webhooks_to_private_addresses_are_refused_in_production(url, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = False
    assert notifications.webhook_address_problem(url)


def test_a_public_address_is_allowed(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = False
    # A literal public address needs no DNS (nothing here can reach a resolver).
    assert notifications.webhook_address_problem("https://93.184.215.14/hook") is None


@pytest.mark.django_db
def test_the_settings_form_and_the_delivery_both_refuse_a_private_receiver(
    operator, alice_client, settings
):
    settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = False
    receiver = Receiver()
    try:
        response = alice_client.post(
            "/lab/notifications/", {"email_on_finish": "on", "webhook_url": receiver.url}
        )
        assert response.status_code == 200
        assert "private, loopback or reserved address" in response.content.decode()
        assert not NotificationSettings.objects.filter(user=operator, webhook_url=receiver.url)
        # A URL saved earlier (or whose DNS changed since) is checked again at delivery.
        NotificationSettings.objects.update_or_create(
            user=operator, defaults={"webhook_url": receiver.url}
        )
        job = services.queue_job(
            requested_by=operator, model="m", endpoint_url="http://127.0.0.1:9", pool="x.y"
        )
        delivery = WebhookDelivery.objects.create(
            job=job, url=receiver.url, payload=notifications.job_payload(job)
        )
        assert notifications.deliver(delivery.pk) == "refused"
        delivery.refresh_from_db()
        assert delivery.last_error.startswith("refused: ") and delivery.delivered_at is None
        assert receiver.requests == []
    finally:
        receiver.close()
