"""The lab agents' API: host keys (hashed, scoped, shown once, revocable), what a host may
report on, how bad requests are answered, and that nothing is half-written."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.test import Client

from lab import agents, services
from lab.models import BenchmarkJob, HostKey, JobEvent, WorkerHost
from runs.models import Run
from submissions.tests.conftest import post_json
from worker.agent import jobs

pytestmark = pytest.mark.django_db
AGENT = "/api/v1/lab/agent/"
JOB = {"model": "m", "endpoint_url": "http://127.0.0.1:9", "pool": "cpu"}


def _key(host_name: str, scopes: list[str] | None = None) -> str:
    return agents.create_host_key(host_name=host_name, user=None, scopes=scopes)[1]


def _post(path: str, body, key: str | None, **extra):
    return post_json(Client(), AGENT + path, body, key, **extra)


def _registered(host_name: str, pools: list[str]) -> str:
    """A key for the host, registered through the API and approved by an admin as it
    registered (a registration that changes an approved host needs approval again)."""
    key = _key(host_name)
    assert _post("register", {"pools": pools}, key).status_code == 200
    services.approve_host(host=WorkerHost.objects.get(name=host_name), user=None)
    return key


@pytest.fixture
def claimed(operator, lab_hosts) -> tuple[BenchmarkJob, str]:
    """A cpu job claimed by lab-cpu through the API, and lab-cpu's key."""
    key = _registered("lab-cpu", ["cpu"])
    job = services.queue_job(requested_by=operator, **JOB)
    answer = _post(f"jobs/{job.pk}/claim", {}, key)
    assert answer.status_code == 200, answer.content
    assert answer.json()["attempt"] == 1 and answer.json()["pool"] == "cpu"
    return job, key


def test_a_host_key_is_stored_hashed_and_only_its_prefix_is_readable(lab_hosts) -> None:
    record, plaintext = agents.create_host_key(host_name="lab-cpu", user=None)
    assert plaintext.startswith("blh_") and len(plaintext) > 40
    stored = HostKey.objects.get(pk=record.pk)
    assert plaintext not in json.dumps(
        {f.name: str(getattr(stored, f.name)) for f in HostKey._meta.fields}
    )
    assert plaintext[4:12] == stored.prefix and stored.scopes == ["agent", "verify"]


@pytest.mark.parametrize(
    "header",
    ["", "Bearer blh_" + "x" * 40, "Bearer bl_" + "x" * 40, "Basic abc", "Bearer "],
)
def test_without_a_valid_host_key_every_agent_call_is_a_401(header, lab_hosts) -> None:
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    response = Client().post(
        AGENT + "register", data="{}", content_type="application/json", **extra
    )
    assert response.status_code == 401 and response.json()["error"]["code"]


def test_a_users_api_key_is_not_a_host_key(alice_key, lab_hosts) -> None:
    assert _post("register", {"pools": ["cpu"]}, alice_key).status_code == 401


def test_a_revoked_key_is_refused_with_the_reason(lab_hosts) -> None:
    key = _key("lab-cpu")
    assert _post("heartbeat", {}, key).status_code == 200
    agents.revoke_host_key(key=HostKey.objects.get())
    answer = _post("heartbeat", {}, key)
    assert answer.status_code == 401 and "revoked" in answer.json()["error"]["message"]


def test_a_host_deleted_during_its_heartbeat_is_told_to_register(lab_hosts, monkeypatch) -> None:
    key = _key("lab-cpu")
    found = agents.host_of

    def found_then_deleted(host_key: HostKey) -> WorkerHost | None:
        host = found(host_key)
        WorkerHost.objects.filter(name="lab-cpu").delete()  # an admin, at that moment
        return host

    monkeypatch.setattr(agents, "host_of", found_then_deleted)
    answer = _post("heartbeat", {}, key)
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "not_registered"


def test_the_host_is_the_keys_not_what_the_agent_says(lab_hosts) -> None:
    key = _key("lab-new")
    answer = _post("register", {"pools": ["cpu"], "name": "lab-cpu"}, key)
    assert answer.status_code == 200 and answer.json()["name"] == "lab-new"
    assert answer.json()["approved"] is False  # approval stays an admin's call


@pytest.mark.parametrize(
    "body, path",
    [
        ({"pools": "cpu"}, "pools"),
        ({"pools": ["Not A Pool!"]}, None),
        ({"pools": ["cpu"], "hardware": [1]}, "hardware"),
        ({}, "pools"),
    ],
)
def test_a_bad_registration_is_a_400_and_stores_nothing(body, path, lab_hosts) -> None:
    answer = _post("register", body, _key("lab-x"))
    assert answer.status_code == 400, answer.content
    if path:
        assert [f["path"] for f in answer.json()["error"]["fields"]] == [path]
    assert not lab_hosts[0].__class__.objects.filter(name="lab-x").exists()


def test_an_unapproved_host_claims_nothing(operator, lab_hosts) -> None:
    key = _key("lab-new")
    _post("register", {"pools": ["cpu"]}, key)
    job = services.queue_job(requested_by=operator, **JOB)
    answer = _post(f"jobs/{job.pk}/claim", {}, key)
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "not_approved"
    assert BenchmarkJob.objects.get(pk=job.pk).status == "queued"


@pytest.mark.parametrize("budget", [None, 0, 512])
def test_the_claimed_jobs_thinking_budget_is_the_engines_run_config(
    budget, operator, lab_hosts, tmp_path
) -> None:
    key = _registered("lab-cpu", ["cpu"])
    job = services.queue_job(requested_by=operator, **JOB, thinking_budget=budget)
    spec = _post(f"jobs/{job.pk}/claim", {}, key).json()
    assert spec["thinking_budget"] == budget
    config = jobs._config(spec, JOB["endpoint_url"], None, tmp_path)
    assert (config.thinking_budget, config.max_tokens) == (budget, None)


def test_a_spec_from_an_older_site_without_a_thinking_budget_runs_on_the_automatic_one(
    claimed, tmp_path
) -> None:
    job, key = claimed
    BenchmarkJob.objects.filter(pk=job.pk).update(thinking_budget=512)
    spec = agents.job_spec(BenchmarkJob.objects.get(pk=job.pk))
    assert spec.pop("thinking_budget") == 512
    config = jobs._config(spec, JOB["endpoint_url"], None, tmp_path)
    assert config.thinking_budget is None and config.model == JOB["model"]


def test_a_host_reports_only_on_the_jobs_it_claimed(claimed) -> None:
    job, _key_of_cpu = claimed
    other = _key("lab-4090-a")
    for path, body in [
        ("events", {"attempt": 1, "events": [{"seq": 1, "event": {"type": "log"}}]}),
        ("heartbeat", {"attempt": 1}),
        ("fail", {"attempt": 1, "error": "sabotage"}),
    ]:
        answer = _post(f"jobs/{job.pk}/{path}", body, other)
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "not_yours"
    assert _post("jobs/999999/heartbeat", {"attempt": 1}, other).status_code == 404
    job.refresh_from_db()
    assert job.status == "claimed" and not job.events.exists()


def test_events_are_stored_in_order_once_and_whatever_they_hold(claimed) -> None:
    job, key = claimed
    batch = [
        {"seq": 2, "event": {"type": "log", "message": "second \x00"}},
        {"seq": 1, "event": {"type": "run_started", "total_tasks": 3}},
    ]
    body = {"attempt": 1, "events": batch, "live": {"type": "task_progress", "live_tps": 9.5}}
    first = _post(f"jobs/{job.pk}/events", body, key)
    assert first.status_code == 200 and first.json() == {"ours": True, "cancel": False}
    assert _post(f"jobs/{job.pk}/events", body, key).status_code == 200  # a replay
    events = list(JobEvent.objects.filter(job=job).order_by("seq"))
    assert [(e.seq, e.kind) for e in events] == [(1, "run_started"), (2, "log")]
    assert events[1].payload["message"] == "second \ufffd"
    job.refresh_from_db()
    assert job.total_tasks == 3 and job.last_decode_tps == 9.5


@pytest.mark.parametrize(
    "body, path",
    [
        ({"events": []}, "attempt"),
        ({"attempt": 1, "events": [{"seq": 0, "event": {}}]}, "events"),
        ({"attempt": 1, "events": [{"seq": 1, "event": "x"}]}, "events"),
        ({"attempt": 1, "events": [{"seq": i, "event": {}} for i in range(1, 102)]}, "events"),
    ],
)
def test_a_malformed_event_post_is_a_400_with_the_field(body, path, claimed) -> None:
    job, key = claimed
    answer = _post(f"jobs/{job.pk}/events", body, key)
    assert answer.status_code == 400
    assert path in [f["path"] for f in answer.json()["error"]["fields"]]
    assert not JobEvent.objects.filter(job=job).exists()


def test_a_cancel_request_reaches_the_agent_in_the_next_answer(claimed) -> None:
    job, key = claimed
    services.cancel_job(job=job)
    answer = _post(f"jobs/{job.pk}/heartbeat", {"attempt": 1}, key)
    assert answer.json() == {"ours": True, "cancel": True}


def test_an_invalid_bundle_is_refused_with_its_paths_and_the_job_goes_on(claimed) -> None:
    job, key = claimed
    answer = _post(f"jobs/{job.pk}/run?attempt=1", {"schema_version": "3.0", "suites": 7}, key)
    assert answer.status_code == 400 and answer.json()["error"]["fields"]
    job.refresh_from_db()
    assert job.status == "claimed" and job.run_id is None and not Run.objects.exists()


def test_the_finished_bundle_is_stored_once_through_the_upload_path(claimed, smoke_run) -> None:
    job, key = claimed
    first = _post(f"jobs/{job.pk}/run?attempt=1", smoke_run, key)
    assert first.status_code == 201, first.content
    job.refresh_from_db()
    run = Run.objects.get()
    assert job.status == "succeeded" and first.json() == {"status": "succeeded", "run": run.pk}
    assert run.submission.channel == "lab" and run.submission.client_run_id == f"lab-job-{job.pk}"
    again = _post(f"jobs/{job.pk}/run?attempt=1", smoke_run, key)  # the answer was lost
    assert again.status_code == 201 and Run.objects.count() == 1


def test_a_key_without_the_verify_scope_cannot_publish_runs(claimed, smoke_run) -> None:
    job, _ = claimed
    agent_only = _key("lab-cpu", ["agent"])
    answer = _post(f"jobs/{job.pk}/run?attempt=1", smoke_run, agent_only)
    assert answer.status_code == 403 and not Run.objects.exists()


def test_staff_create_a_key_that_is_shown_once_and_revoke_it(bob, operator, lab_hosts) -> None:
    bob.is_staff = True
    bob.save()
    client = Client()
    client.force_login(bob)
    bob.user_permissions.add(*operator.user_permissions.all())
    page = client.post("/lab/hosts/", {"host_name": "lab-spare", "scopes": ["agent", "verify"]})
    assert page.status_code == 200 and page.headers["Cache-Control"].startswith("max-age=0")
    plaintext = page.context["new_key"]
    assert plaintext.startswith("blh_") and plaintext in page.content.decode()
    assert plaintext not in client.get("/lab/hosts/").content.decode()  # shown once
    assert _post("heartbeat", {}, plaintext).status_code == 409  # valid, not registered yet
    key = HostKey.objects.get()
    operator_client = Client()
    operator_client.force_login(operator)  # an operator, not an admin
    assert operator_client.post(f"/lab/hosts/keys/{key.pk}/revoke/").status_code == 404
    assert operator_client.post("/lab/hosts/", {"host_name": "x"}).status_code == 404
    assert client.post(f"/lab/hosts/keys/{key.pk}/revoke/").status_code == 302
    assert _post("heartbeat", {}, plaintext).status_code == 401


def test_the_management_command_prints_the_key_once(capsys, lab_hosts) -> None:
    call_command("create_host_key", "lab-cpu", "--scope", "agent")
    plaintext = capsys.readouterr().out.strip()
    assert _post("heartbeat", {}, plaintext).status_code == 200
    assert HostKey.objects.get().scopes == ["agent"]
