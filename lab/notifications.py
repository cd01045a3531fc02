"""Tell a job's requester it finished: an email, and a signed webhook POST if configured."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
import time
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from core.links import absolute_url
from lab import dispatch
from lab.models import BenchmarkJob, NotificationSettings, WebhookDelivery
from runs import bounds
from worker.rules.redact import redact_text

SIGNATURE_HEADER = "X-BenchLoop-Signature"
TOLERANCE_SECONDS = 300


class WebhookFailed(Exception):
    """The receiver did not answer 2xx; the delivery is retried with backoff."""


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """`t=<unix time>,v1=<hex HMAC-SHA256 of "t.body">`: the time stops replays."""
    moment = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"{moment}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={moment},v1={digest}"


def verify(
    secret: str,
    body: bytes,
    header: str,
    *,
    now: int | None = None,
    tolerance: int = TOLERANCE_SECONDS,
) -> bool:
    """Check a signature header as a receiver should: right key, right body, recent."""
    try:
        parts = dict(item.split("=", 1) for item in header.split(","))
        moment = int(parts["t"])
        given = parts["v1"]
    except (KeyError, ValueError):
        return False
    if abs((int(time.time()) if now is None else now) - moment) > tolerance:
        return False
    expected = sign(secret, body, moment).split("v1=", 1)[1]
    return hmac.compare_digest(expected, given)


def job_payload(job: BenchmarkJob) -> dict:
    """The webhook body. Receivers are often shared channels, so its text is redacted like a
    public page's; the raw error is on the job page, for the requester."""
    return {
        "event": f"job.{job.status}",
        "job": {
            "id": job.pk,
            "status": job.status,
            "model": redact_text(job.model),
            "pool": job.pool,
            "profile": redact_text(job.profile),
            "attempts": job.attempts,
            "error": redact_text(job.error),
            "finished_at": job.finished_at.isoformat() if job.finished_at else None,
            # A webhook receiver is another site: only absolute links mean anything there.
            "url": absolute_url(reverse("lab:job", args=[job.pk])),
            "run_url": absolute_url(reverse("leaderboard:run", args=[job.run_id]))
            if job.run_id
            else None,
            # "verified" only for a verified run; otherwise why not (measured under load).
            "run_evidence": job.run_evidence or None,
        },
    }


def notify_finished(job_id: int) -> None:
    job = BenchmarkJob.objects.select_related("requested_by", "run").get(pk=job_id)
    prefs, _ = NotificationSettings.objects.get_or_create(user=job.requested_by)
    if prefs.email_on_finish and job.requested_by.email:
        send_mail(
            # One line whatever an older job's model name holds (send_mail refuses newlines).
            subject=bounds.one_line(
                f"BenchLoop job {job.pk} {job.status}: {redact_text(job.model)}"
            ),
            message=_email_text(job),
            from_email=settings.DEFAULT_FROM_EMAIL,
            recipient_list=[job.requested_by.email],
            fail_silently=True,
        )
    if prefs.webhook_url:
        try:
            with transaction.atomic():
                delivery = WebhookDelivery.objects.create(
                    job=job, url=prefs.webhook_url, payload=job_payload(job)
                )
        except IntegrityError:
            return  # already notified for this job: a repeated message sends nothing twice
        dispatch.send(dispatch.DELIVER_WEBHOOK, delivery.pk)


_OUTCOMES: dict[str, str] = {
    BenchmarkJob.Status.SUCCEEDED: "succeeded",
    BenchmarkJob.Status.FAILED: "failed",
    BenchmarkJob.Status.CANCELLED: "was cancelled",
}


def _email_text(job: BenchmarkJob) -> str:
    # Redacted like the public job page: mail is forwarded and archived; the raw error is on
    # the job page, which only the requester and lab operators see unredacted.
    outcome = _OUTCOMES.get(job.status, f"is {job.status}")
    lines = [f"Job {job.pk} ({redact_text(job.model)} on pool {job.pool}) {outcome}."]
    if job.error:
        lines.append(f"Reason: {redact_text(job.error)}")
    if job.run_id:
        url = absolute_url(reverse("leaderboard:run", args=[job.run_id]))
        # "Verified" is the run's own word, never the job's: a run measured under load is not.
        if job.run_evidence == "verified":
            lines.append(f"Verified run: {url}")
        else:
            lines.append(f"Run ({job.run_evidence}): {url}")
    lines.append(f"Job page: {absolute_url(reverse('lab:job', args=[job.pk]))}")
    return "\n".join(lines)


def webhook_address_problem(url: str) -> str | None:
    """Why ``url`` may not receive webhooks, or None when it may.

    Every address the host resolves to must be public: a webhook must not become a way to make
    the site's workers call the lab network, the cloud metadata service or loopback.
    """
    if settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "a webhook needs an http or https URL with a host name"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, ValueError):
        return "the webhook host name does not resolve"
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if not address.is_global:
            return "the webhook host resolves to a private, loopback or reserved address"
    return None


def deliver(delivery_id: int) -> str:
    delivery = WebhookDelivery.objects.select_related("job__requested_by").get(pk=delivery_id)
    if delivery.delivered_at:
        return "already delivered"
    prefs = NotificationSettings.objects.get(user=delivery.job.requested_by)
    body = json.dumps(delivery.payload, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: sign(prefs.webhook_secret, body),
        "User-Agent": "BenchLoop-Webhook/1",
    }
    WebhookDelivery.objects.filter(pk=delivery_id).update(attempts=delivery.attempts + 1)
    # Checked again at delivery: DNS may have changed since the URL was saved.
    problem = webhook_address_problem(delivery.url)
    if problem:
        WebhookDelivery.objects.filter(pk=delivery_id).update(last_error=f"refused: {problem}")
        return "refused"
    try:
        response = httpx.post(delivery.url, content=body, headers=headers, timeout=10)
    except httpx.HTTPError as exc:
        WebhookDelivery.objects.filter(pk=delivery_id).update(last_error=str(exc)[:500])
        raise WebhookFailed(str(exc)) from exc
    WebhookDelivery.objects.filter(pk=delivery_id).update(last_status=response.status_code)
    if not 200 <= response.status_code < 300:
        raise WebhookFailed(f"receiver answered {response.status_code}")
    WebhookDelivery.objects.filter(pk=delivery_id).update(delivered_at=timezone.now())
    return "delivered"
