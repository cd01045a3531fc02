"""Where a job runs: the new-job form and the API place it by one rule (services.place_job)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from lab.models import BenchmarkJob, WorkerHost
from lab.tests.conftest import approved_host
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db
FORM = {"target": "endpoint", "provider": "auto", "binary": "llama-server", "profile": "smoke"} | {
    "trials": 3,
    "harness": "raw",
    "priority": 5,
}
SERVER = "http://127.0.0.1:8080|qwen3-8b-q4|lab-4090-a"


@pytest.fixture
def operator_client(operator) -> Client:
    client = Client()
    client.force_login(operator)
    return client


def test_a_picked_server_sends_the_job_to_its_host_with_the_model_it_names(
    operator_client, lab_hosts, broker_key, django_capture_on_commit_callbacks
) -> None:
    import redis
    from django.conf import settings

    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)

    def queued(pool: str) -> list[dict]:
        # Celery's Redis transport keeps one list per priority step: "pool", "pool\x06\x163", …
        keys = broker.keys(broker_key(pool) + "*")
        return [json.loads(m) for key in keys for m in broker.lrange(key, 0, -1)]

    with django_capture_on_commit_callbacks(execute=True):
        response = operator_client.post("/lab/jobs/new/", FORM | {"server": SERVER})
    assert response.status_code == 302, response.context["form"].errors
    job = BenchmarkJob.objects.get()
    assert (job.pool, job.model, job.endpoint_url) == (
        "host.lab-4090-a",
        "qwen3-8b-q4",
        "http://127.0.0.1:8080",
    )
    sent = queued("host.lab-4090-a")
    assert [m["headers"]["task"] for m in sent] == ["worker.run_benchmark_job"]
    assert [m["headers"]["argsrepr"] for m in sent] == [f"({job.pk},)"]
    assert queued("cpu") == queued("gpu.4090") == []  # not "cpu", not gpu.4090


def test_the_form_does_not_ask_for_the_model_a_server_names(operator_client, lab_hosts) -> None:
    page = operator_client.get("/lab/jobs/new/")
    form = page.context["form"]
    assert not form.fields["model"].required
    missing = operator_client.post("/lab/jobs/new/", FORM | {"pool": "cpu", "endpoint_url": "x"})
    assert "Name the model, or pick a server" in missing.context["form"].errors["model"][0]


def test_a_pool_no_approved_host_serves_is_refused_with_the_pools_that_are(
    operator_client, lab_hosts, alice_key
) -> None:
    WorkerHost.objects.create(name="lab-new", pools=["gpu.h100"])  # registered, not approved
    for pool in ("gpu.h100", "gpu.3090"):
        body = FORM | {"pool": pool, "model": "m", "endpoint_url": "http://10.0.0.2:8080"}
        response = operator_client.post("/lab/jobs/new/", body)
        error = response.context["form"].errors["pool"][0]
        assert f"No approved lab host serves the pool “{pool}”" in error
        assert "would wait forever" in error and "Pools served now: cpu, gpu.4090." in error
        api = post_json(Client(), "/api/v1/jobs", {**body, "trials": 1}, alice_key)
        assert api.status_code == 400
        assert api.json()["error"]["fields"][0]["path"] == "pool"
    assert not BenchmarkJob.objects.exists()


def test_without_any_approved_host_the_message_says_so(operator_client) -> None:
    body = FORM | {"pool": "cpu", "model": "m", "endpoint_url": "http://10.0.0.2:8080"}
    error = operator_client.post("/lab/jobs/new/", body).context["form"].errors["pool"][0]
    assert "No host is approved yet" in error


def test_the_pool_select_offers_only_pools_approved_hosts_serve(operator_client, lab_hosts):
    WorkerHost.objects.create(name="lab-new", pools=["gpu.h100"])
    html = operator_client.get("/lab/jobs/new/").content.decode()
    assert '<option value="gpu.4090">' in html and '<option value="cpu">' in html
    assert "gpu.h100" not in html
    assert f'value="{SERVER}"' in html


def test_a_job_for_offline_hosts_is_queued_with_a_warning(operator_client, alice_key) -> None:
    stale = timezone.now() - timedelta(minutes=10)
    approved_host("lab-old", ["gpu.4090"])
    WorkerHost.objects.filter(name="lab-old").update(last_heartbeat_at=stale)
    body = FORM | {"pool": "gpu.4090", "model": "m", "endpoint_url": "http://10.0.0.2:8080"}
    response = operator_client.post("/lab/jobs/new/", body, follow=True)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Every host that serves pool gpu.4090 is offline (lab-old)" in page
    api = post_json(Client(), "/api/v1/jobs", {**body, "trials": 1}, alice_key)
    assert api.status_code == 202 and "lab-old" in api.json()["warning"]


def test_the_api_places_a_job_on_a_named_host(lab_hosts, operator, alice_key) -> None:
    body = {"model": "m", "endpoint_url": "http://127.0.0.1:8080", "host": "lab-4090-a"}
    response = post_json(Client(), "/api/v1/jobs", body, alice_key)
    assert response.status_code == 202, response.content
    assert response.json()["pool"] == "host.lab-4090-a" and "warning" not in response.json()
    unknown = post_json(Client(), "/api/v1/jobs", {**body, "host": "lab-zz"}, alice_key)
    assert unknown.status_code == 400
    assert unknown.json()["error"]["fields"][0]["path"] == "host"


def test_the_form_groups_its_fields_with_human_labels(operator_client, lab_hosts) -> None:
    html = operator_client.get("/lab/jobs/new/").content.decode()
    for legend in ("Where it runs", "Endpoint", "Managed llama.cpp server", "What to run"):
        assert f"<legend>{legend}</legend>" in html
    assert ">API key reference</label>" in html and "Api key ref" not in html
    endpoint = html.index("<legend>Endpoint</legend>")
    managed = html.index("<legend>Managed llama.cpp server</legend>")
    assert endpoint < html.index('name="api_key_ref"') < managed < html.index('name="model_path"')


def test_a_host_whose_name_cannot_be_a_queue_is_refused_on_the_server_field(
    operator, alice_key
) -> None:
    approved_host("Lab A", ["gpu.4090"])
    body = {"model": "m", "endpoint_url": "http://127.0.0.1:8080", "host": "Lab A"}
    response = post_json(Client(), "/api/v1/jobs", body, alice_key)
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert fields[0]["path"] == "host" and "rename the host" in fields[0]["message"]
