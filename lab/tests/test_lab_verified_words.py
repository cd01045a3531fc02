"""Words match the record (issue 31, defect 14): the job page, the finish mail and the webhook
say "verified" only for a verified run, and say why when it is not. The bundle is the real
engine's, measured on the real llama.cpp server, uploaded through the agent API."""

from __future__ import annotations

import copy
import re

import pytest
from django.core import mail
from django.test import Client

from lab import notifications, services
from lab.models import BenchmarkJob
from lab.tests.test_agent_trust import JOB, _post, _registered
from runs.models import Run
from worker.engine.bundle import upload_view
from worker.engine.hardware import detect_hardware
from worker.engine.orchestrator import run_benchmark
from worker.engine.plan import RunConfig


@pytest.fixture(scope="module")
def bundle(llm_url, tmp_path_factory) -> dict:
    """A speed-only run of one task, three trials, through the engine as the CLI runs it."""
    home = tmp_path_factory.mktemp("words-home")
    config = RunConfig(url=llm_url, tasks=["speed-p128-n256"], trials=3, max_tokens=8, home=home)
    outcome = run_benchmark(config)
    assert outcome.status == "complete"
    return upload_view(outcome.bundle)


def _finished_job(operator, bundle: dict, contention: str) -> tuple[BenchmarkJob, Run]:
    """A job run by lab-cpu whose bundle says the machine was `contention` while it measured."""
    # Approved as this machine, which the engine measured the bundle on.
    key = _registered("lab-cpu", ["cpu"], detect_hardware())
    job = services.queue_job(requested_by=operator, **JOB)
    assert _post(f"jobs/{job.pk}/claim", {}, key).status_code == 200
    loaded = copy.deepcopy(bundle)
    loaded["contention"]["status"] = contention
    answer = _post(f"jobs/{job.pk}/run?attempt=1", loaded, key)
    assert answer.status_code == 201, answer.content
    job.refresh_from_db()
    return job, Run.objects.get(pk=job.run_id)


def _result_line(job: BenchmarkJob) -> str:
    page = Client().get(f"/lab/jobs/{job.pk}/").content.decode()
    found = re.search(r"<p[^>]*>(Result: .*?)</p>", page, re.S)
    assert found, page
    return re.sub(r"<[^>]+>", "", found.group(1))


@pytest.mark.llm
@pytest.mark.django_db
def test_a_run_measured_under_load_is_never_called_verified(
    bundle, operator, lab_hosts, settings
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    job, run = _finished_job(operator, bundle, "contended")
    assert (job.status, run.is_verified, run.contention_status) == (
        "succeeded",
        False,
        "contended",
    )
    line = _result_line(job)
    assert line == f"Result: run #{run.pk} (measured under load: self-reported)"
    notifications.notify_finished(job.pk)  # the task the job's end queued
    [message] = mail.outbox
    assert "verified" not in message.body.lower()
    assert "Run (measured under load: self-reported): http" in message.body
    assert f"Job {job.pk} (m on pool cpu) succeeded." in message.body
    assert "is succeeded" not in message.body
    payload = notifications.job_payload(job)["job"]
    assert payload["run_evidence"] == "measured under load: self-reported"


@pytest.mark.llm
@pytest.mark.django_db
def test_a_verified_run_is_called_verified(bundle, operator, lab_hosts, settings) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    job, run = _finished_job(operator, bundle, "clear")
    assert run.is_verified
    assert _result_line(job) == f"Result: verified run #{run.pk}"
    notifications.notify_finished(job.pk)
    [message] = mail.outbox
    assert "Verified run: http" in message.body
    assert f"Job {job.pk} (m on pool cpu) succeeded." in message.body
    assert notifications.job_payload(job)["job"]["run_evidence"] == "verified"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "status, words",
    [("failed", "failed."), ("cancelled", "was cancelled."), ("succeeded", "succeeded.")],
)
def test_the_mail_says_what_became_of_the_job_in_plain_words(
    status, words, operator, settings
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    job = services.queue_job(requested_by=operator, **JOB)
    BenchmarkJob.objects.filter(pk=job.pk).update(status=status)
    notifications.notify_finished(job.pk)
    [message] = mail.outbox
    assert message.body.splitlines()[0] == f"Job {job.pk} (m on pool cpu) {words}"
