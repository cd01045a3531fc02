"""The site, not the agent, decides what is verified (issue 31): a run is stored only from the
job's current attempt, a host's pools are what an admin approved, and an event is checked
against the protocol's types and stored only while its attempt runs the job, within the caps.
Each test drives the real agent API (URLs, views, services) on the test database."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from lab import agents, services
from lab.models import BenchmarkJob, JobEvent, WorkerHost
from runs.models import Run
from submissions.models import Submission
from worker.rules.protocol import MAX_EVENT_BYTES, MAX_EVENTS_PER_JOB

pytestmark = pytest.mark.django_db
AGENT = "/api/v1/lab/agent/"
JOB = {"model": "m", "endpoint_url": "http://127.0.0.1:9", "pool": "cpu"}
# The machine the smoke_run fixture was measured on, as the agent's detection describes it: a
# host registered as this machine publishes that run as verified (lab.inventory).
SMOKE_MACHINE = {
    "cpu_model": "Intel(R) Xeon(R) Processor",
    "gpus": [{"index": 0, "name": "NVIDIA RTX 4090", "vram_gb": 24.0}],
    "ram_gb": 23.54,
    "os": "Linux",
}


def _post(path: str, body, key: str, *, raw: bytes | None = None):
    """POST as the agent does; a server error comes back as a 500, not as an exception."""
    client = Client(raise_request_exception=False)
    data = raw if raw is not None else json.dumps(body)
    return client.post(
        AGENT + path, data=data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )


def _registered(host_name: str, pools: list[str], hardware: dict | None = None) -> str:
    """A host key, registered through the API and approved by an admin as it registered."""
    key = agents.create_host_key(host_name=host_name, user=None)[1]
    answer = _post("register", {"pools": pools, "hardware": hardware or {}}, key)
    assert answer.status_code == 200, answer.content
    services.approve_host(host=WorkerHost.objects.get(name=host_name), user=None)
    return key


@pytest.fixture
def claimed(operator, lab_hosts) -> tuple[BenchmarkJob, str]:
    """A cpu job that lab-cpu, approved as the smoke run's machine, claimed (attempt 1) and
    started, and lab-cpu's key."""
    key = _registered("lab-cpu", ["cpu"], SMOKE_MACHINE)
    job = services.queue_job(requested_by=operator, **JOB)
    spec = _post(f"jobs/{job.pk}/claim", {}, key).json()
    assert spec["attempt"] == 1
    assert _post(f"jobs/{job.pk}/running", {"attempt": 1}, key).status_code == 200
    return job, key


def _nothing_stored(job: BenchmarkJob) -> None:
    job.refresh_from_db()
    assert job.run_id is None
    assert not Run.objects.exists() and not Submission.objects.exists()


# --- defect 2: a run only from the job's current attempt ------------------------------------


def test_no_run_is_stored_after_the_host_reported_the_job_failed(claimed, smoke_run) -> None:
    job, key = claimed
    assert _post(f"jobs/{job.pk}/fail", {"attempt": 1, "error": "boom"}, key).json() == {
        "status": "failed"
    }
    answer = _post(f"jobs/{job.pk}/run?attempt=1", smoke_run, key)
    assert answer.status_code == 409, answer.content
    assert answer.json()["error"]["code"] == "not_current"
    _nothing_stored(job)
    assert job.status == "failed"


def test_no_run_is_stored_after_an_operator_cancelled_the_job(claimed, smoke_run) -> None:
    job, key = claimed
    services.cancel_job(job=job)  # running: it stops at its next task boundary
    answer = _post(f"jobs/{job.pk}/run?attempt=1", smoke_run, key)
    assert answer.status_code == 409, answer.content
    assert "cancelled" in answer.json()["error"]["message"]
    _nothing_stored(job)
    assert job.status == "cancelled" and job.finished_at  # the operator's word stands
    # A cancel of a queued job: nobody can claim it, so nobody can finish it either.
    again = services.cancel_job(job=services.queue_job(requested_by=job.requested_by, **JOB))
    assert _post(f"jobs/{again.pk}/claim", {}, key).status_code == 409
    assert _post(f"jobs/{again.pk}/run?attempt=1", smoke_run, key).status_code == 403


def test_no_run_is_stored_for_another_attempt_than_the_current_one(claimed, smoke_run) -> None:
    job, key = claimed
    for attempt in (2, 0, 1000):
        answer = _post(f"jobs/{job.pk}/run?attempt={attempt}", smoke_run, key)
        assert answer.status_code in (400, 409), answer.content
    _nothing_stored(job)
    # The attempt the reaper took back: the host claims the job again (attempt 2), and the
    # first attempt's late upload is refused.
    stale = timezone.now() - timedelta(seconds=3600)
    BenchmarkJob.objects.filter(pk=job.pk).update(heartbeat_at=stale)
    assert _post(f"jobs/{job.pk}/claim", {}, key).json()["attempt"] == 2
    late = _post(f"jobs/{job.pk}/run?attempt=1", smoke_run, key)
    assert late.status_code == 409 and late.json()["error"]["code"] == "not_current"
    _nothing_stored(job)
    # The current attempt's upload is the one stored, as a verified run.
    current = _post(f"jobs/{job.pk}/run?attempt=2", smoke_run, key)
    assert current.status_code == 201, current.content
    assert Run.objects.get().is_verified and BenchmarkJob.objects.get(pk=job.pk).attempts == 2


def _at_once(key: str, *calls: tuple[str, dict]) -> list:
    """POST each (path, body) from its own thread and connection, released together."""
    start, answers = threading.Barrier(len(calls)), [None] * len(calls)

    def send(index: int, path: str, body: dict) -> None:
        start.wait()
        try:
            answers[index] = _post(path, body, key)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(i, *call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


@pytest.mark.django_db(transaction=True)
def test_a_failure_and_an_upload_at_once_never_leave_a_run_on_a_failed_job(
    operator, lab_hosts, smoke_run
) -> None:
    """The check and the write are one transaction on the locked job: whichever of the two
    requests comes second finds the other's outcome (real Postgres, two connections)."""
    key = _registered("lab-cpu", ["cpu"], SMOKE_MACHINE)
    for _ in range(4):
        job = services.queue_job(requested_by=operator, **JOB)
        assert _post(f"jobs/{job.pk}/claim", {}, key).status_code == 200
        failed, uploaded = _at_once(
            key,
            (f"jobs/{job.pk}/fail", {"attempt": 1, "error": "at the same moment"}),
            (f"jobs/{job.pk}/run?attempt=1", smoke_run),
        )
        job.refresh_from_db()
        assert failed.status_code == 200 and failed.json()["status"] == job.status
        if job.status == "failed":
            assert uploaded.status_code == 409 and job.run_id is None
        else:
            assert (job.status, uploaded.status_code) == ("succeeded", 201)
            assert Run.objects.get(pk=job.run_id).is_verified
        Run.objects.all().delete()  # the next round's upload is a new run, not a repeat


# --- defect 3: pools and hardware are what an admin approved ---------------------------------

MANAGED = {
    "target": "managed",
    "model": "secret-model",
    "model_path": "/models/secret-h100.gguf",
    "launch_flags": ["--api-key-file", "/etc/secret-flag"],
    "pool": "gpu.h100",
}


def test_a_host_that_registers_another_pool_awaits_approval_and_gets_none_of_its_jobs(
    operator, lab_hosts
) -> None:
    key = _registered("lab-cpu", ["cpu"])
    assert _post("register", {"pools": ["cpu"]}, key).json()["approved"] is True  # a restart
    h100 = services.queue_job(requested_by=operator, **MANAGED)
    moved = _post("register", {"pools": ["cpu", "gpu.h100"]}, key)
    assert moved.status_code == 200
    assert moved.json()["approved"] is False and moved.json()["pools"] == ["cpu", "gpu.h100"]
    answer = _post(f"jobs/{h100.pk}/claim", {}, key)
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "not_approved"
    for secret in ("secret-h100", "/etc/secret-flag", "secret-model"):
        assert secret not in answer.content.decode()
    h100.refresh_from_db()
    assert (h100.status, h100.attempts, h100.host_id) == ("queued", 0, None)
    assert _post("heartbeat", {}, key).json()["approved"] is False  # the agent stops consuming
    # An admin looks at the change and approves it: now the host takes the pool's jobs.
    services.approve_host(host=WorkerHost.objects.get(name="lab-cpu"), user=None)
    assert _post(f"jobs/{h100.pk}/claim", {}, key).json()["model_path"] == MANAGED["model_path"]


def test_a_host_that_claims_other_hardware_awaits_approval_and_publishes_nothing(
    claimed, smoke_run
) -> None:
    job, key = claimed
    h100 = {"cpu_model": "EPYC", "gpus": [{"name": "NVIDIA H100 80GB HBM3", "vram_gb": 80}]}
    assert _post("register", {"pools": ["cpu"], "hardware": h100}, key).json()["approved"] is False
    answer = _post(f"jobs/{job.pk}/run?attempt=1", smoke_run, key)
    assert answer.status_code == 409 and "awaiting approval" in answer.json()["error"]["message"]
    _nothing_stored(job)


# --- defect 5: events are checked against the protocol's types -------------------------------

ILL_TYPED = [
    ({"type": "run_started", "total_tasks": "many"}, "events[0].event.total_tasks"),
    ({"type": "run_started", "total_tasks": 2**80}, "events[0].event.total_tasks"),
    ({"type": "run_started", "total_tasks": -3}, "events[0].event.total_tasks"),
    ({"type": "task_completed", "decode_tps": {}}, "events[0].event.decode_tps"),
    ({"type": "task_completed", "completed_tasks": -1}, "events[0].event.completed_tasks"),
    ({"type": "task_completed", "completed_tasks": 2**80}, "events[0].event.completed_tasks"),
    ({"type": "suite_started", "suite": ["x"]}, "events[0].event.suite"),
    ({"type": "task_started", "task_id": {"a": 1}}, "events[0].event.task_id"),
    ({"type": "no_such_event"}, "events[0].event.type"),
]


@pytest.mark.parametrize("event, path", ILL_TYPED)
def test_an_ill_typed_event_is_a_400_naming_its_field(event, path, claimed) -> None:
    job, key = claimed
    body = {"attempt": 1, "events": [{"seq": 1, "event": event}]}
    answer = _post(f"jobs/{job.pk}/events", body, key)
    assert answer.status_code == 400, answer.content
    assert [f["path"] for f in answer.json()["error"]["fields"]] == [path]
    assert not JobEvent.objects.filter(job=job).exists()
    job.refresh_from_db()
    assert (job.total_tasks, job.completed_tasks, job.last_decode_tps) == (0, 0, None)


@pytest.mark.parametrize(
    "live, path",
    [
        ({"type": "task_progress", "live_tps": "fast"}, "live.live_tps"),
        ({"type": "task_progress", "live_tps": 1e300}, "live.live_tps"),
        ({"type": "task_progress", "live_tps": -1}, "live.live_tps"),
        ({"type": "run_started", "total_tasks": 3}, "live.type"),  # live ticks only
    ],
)
def test_an_ill_typed_live_tick_is_a_400_naming_its_field(live, path, claimed) -> None:
    job, key = claimed
    answer = _post(f"jobs/{job.pk}/events", {"attempt": 1, "events": [], "live": live}, key)
    assert answer.status_code == 400, answer.content
    assert [f["path"] for f in answer.json()["error"]["fields"]] == [path]
    job.refresh_from_db()
    assert job.last_decode_tps is None


def test_a_well_typed_event_keeps_only_the_fields_the_protocol_names(claimed) -> None:
    job, key = claimed
    event = {"type": "task_completed", "task_id": "t", "completed_tasks": 2, "decode_tps": 41.5}
    body = {"attempt": 1, "events": [{"seq": 1, "event": event | {"smuggled": "x" * 100}}]}
    assert _post(f"jobs/{job.pk}/events", body, key).status_code == 200
    stored = JobEvent.objects.get(job=job)
    assert stored.payload == {"task_id": "t", "completed_tasks": 2, "decode_tps": 41.5}
    job.refresh_from_db()
    assert (job.completed_tasks, job.last_decode_tps) == (2, 41.5)


# --- defect 6: events only from the running attempt, and capped ------------------------------


def _events(job_id: int, key: str, attempt: int, *messages: str, first: int = 1):
    items = [
        {"seq": first + i, "event": {"type": "log", "message": m}} for i, m in enumerate(messages)
    ]
    return _post(f"jobs/{job_id}/events", {"attempt": attempt, "events": items}, key)


def test_events_for_an_attempt_that_never_happened_are_a_409_and_never_shown(claimed) -> None:
    job, key = claimed
    for attempt in (2, 7):
        answer = _events(job.pk, key, attempt, "FORGED attempt")
        assert answer.status_code == 409 and answer.json()["error"]["code"] == "not_current"
    assert not JobEvent.objects.filter(job=job).exists()
    assert "FORGED" not in Client().get(f"/lab/jobs/{job.pk}/").content.decode()


@pytest.mark.parametrize("ending", ["run", "fail", "cancel"])
def test_events_after_the_job_ended_are_a_409_and_never_shown(ending, claimed, smoke_run) -> None:
    job, key = claimed
    assert _events(job.pk, key, 1, "honest").status_code == 200
    if ending == "run":
        assert _post(f"jobs/{job.pk}/run?attempt=1", smoke_run, key).status_code == 201
    elif ending == "fail":
        _post(f"jobs/{job.pk}/fail", {"attempt": 1, "error": "x"}, key)
    else:
        _post(f"jobs/{job.pk}/fail", {"attempt": 1, "error": "stop", "cancelled": True}, key)
    assert BenchmarkJob.objects.get(pk=job.pk).is_final
    late = _events(job.pk, key, 1, "FORGED after the end", first=2)
    assert late.status_code == 409 and "ended" in late.json()["error"]["message"]
    assert list(JobEvent.objects.filter(job=job).values_list("payload", flat=True)) == [
        {"message": "honest"}
    ]
    assert "FORGED" not in Client().get(f"/lab/jobs/{job.pk}/").content.decode()


def test_a_jobs_events_are_capped_in_count_and_the_answer_states_the_cap(claimed) -> None:
    job, key = claimed
    JobEvent.objects.bulk_create(
        JobEvent(job=job, attempt=1, seq=seq, kind="log", payload={"message": "m"})
        for seq in range(1, MAX_EVENTS_PER_JOB + 1)
    )
    over = _events(job.pk, key, 1, "one too many", first=MAX_EVENTS_PER_JOB + 1)
    assert over.status_code == 409 and over.json()["error"]["code"] == "event_limit"
    assert f"at most {MAX_EVENTS_PER_JOB} events" in over.json()["error"]["message"]
    assert JobEvent.objects.filter(job=job).count() == MAX_EVENTS_PER_JOB
    # A replay of events already stored is still answered (the agent's lost answer).
    assert _events(job.pk, key, 1, "m", first=MAX_EVENTS_PER_JOB).status_code == 200


def test_an_event_over_the_size_cap_is_a_400_that_states_the_cap(claimed) -> None:
    job, key = claimed
    answer = _events(job.pk, key, 1, "x" * 40_000)
    assert answer.status_code == 400
    (field,) = answer.json()["error"]["fields"]
    assert field["path"] == "events[0].event"
    assert f"at most {MAX_EVENT_BYTES} bytes" in field["message"]
    assert f"{MAX_EVENT_BYTES} bytes" in answer.json()["error"]["message"]
    assert not JobEvent.objects.filter(job=job).exists()


def test_the_agents_own_long_texts_are_cut_to_fit_rather_than_refused(claimed) -> None:
    """The agent trims an endpoint's long error page before it posts (worker.agent.jobs)."""
    from worker.rules.validate import fit_event

    job, key = claimed
    event = fit_event({"type": "run_failed", "error": "<html>" + "é" * 40_000})
    body = {"attempt": 1, "events": [{"seq": 1, "event": event}]}
    assert _post(f"jobs/{job.pk}/events", body, key).status_code == 200
    stored = JobEvent.objects.get(job=job).payload["error"]
    assert stored.startswith("<html>éé") and stored.endswith("cut to fit the event size cap]")


def test_the_caps_are_stated_in_the_docs() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    assert f"{MAX_EVENTS_PER_JOB:,} events" in text and f"{MAX_EVENT_BYTES:,} bytes" in text
