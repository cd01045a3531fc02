"""The lab agent's lines during a job carry its job id and attempt, those of the job's
event-sending thread too (worker.agent.jobs binds them; worker.rules.logcontext)."""

from __future__ import annotations

import logging

import httpx
import pytest

from lab import services
from lab.models import BenchmarkJob
from worker.agent import jobs
from worker.rules.logcontext import ContextFilter

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_agent_line_of_a_job_names_the_job(
    tmp_path, operator, lab_hosts, agent_for, monkeypatch, caplog
) -> None:
    caplog.set_level(logging.INFO)
    caplog.handler.addFilter(ContextFilter())
    job = services.queue_job(
        requested_by=operator, model="m", endpoint_url="http://127.0.0.1:9", pool="cpu"
    )
    client = agent_for("lab-cpu")
    # The site blinks once as the first events are sent: the sender's thread says so, retries.
    real_post, blinked = client._http.post, []

    def flaky_post(url: str, *args, **kwargs):
        if url.endswith("/events") and not blinked:
            blinked.append(url)
            raise httpx.ConnectError("the site blinked")
        return real_post(url, *args, **kwargs)

    monkeypatch.setattr(client._http, "post", flaky_post)

    def engine(state, url, api_key, server=None):
        state.emit({"type": "log", "message": "measuring"})
        logging.getLogger("worker.engine.orchestrator").info("measuring %s", url)
        raise RuntimeError("the disk vanished")

    monkeypatch.setattr(jobs, "_run_engine", engine)
    outcome = jobs.run_job(client, job.pk, jobs_root=tmp_path / "lab-jobs", heartbeat=1)

    assert outcome == "failed: RuntimeError: the disk vanished"
    assert BenchmarkJob.objects.get(pk=job.pk).status == "failed"
    # Every line of the agent's (its HTTP client's included), from whichever of the job's
    # threads; the in-process site's own lines aside, logged by the live server's threads.
    agent = [r for r in caplog.records if not r.name.startswith("django")]
    sender = f"benchloop-job-{job.pk}-events"
    said = {(r.name, r.getMessage().split(" (")[0], r.threadName) for r in agent}
    assert said >= {
        ("worker.engine.orchestrator", "measuring http://127.0.0.1:9", "MainThread"),
        ("worker.agent.jobs", f"job {job.pk} failed", "MainThread"),
        ("worker.agent.client", f"site call jobs/{job.pk}/events failed", sender),
    }, said
    claim, *after = agent
    assert claim.getMessage().startswith(f"HTTP Request: POST {client.base}jobs/{job.pk}/claim")
    assert claim.context == {"job_id": job.pk}  # the attempt is known once claimed
    assert all(r.context == {"job_id": job.pk, "attempt": 1} for r in after), [
        (r.name, r.getMessage(), r.context) for r in after
    ]
