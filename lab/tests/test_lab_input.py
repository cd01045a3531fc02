"""What the lab API, the job form and lab hosts put into the database: clear field errors for
bad jobs, and an endpoint's or host's words stored whatever they hold (runs.bounds)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.test import Client
from django.utils import timezone

from lab import services
from lab.models import BenchmarkJob, JobEvent, QuickPrompt, WorkerHost
from submissions.tests.conftest import post_json
from submissions.tests.surfaces import assert_renders
from worker.agent import prompts
from worker.rules.reasoning import MAX_TOKENS_CEILING

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lab_hosts")]
JOB = {"model": "qwen3:8b", "endpoint_url": "http://127.0.0.1:8080/v1", "pool": "cpu"}


def _fields(response) -> dict[str, str]:
    assert response.status_code == 400, response.content[:400]
    return {item["path"]: item["message"] for item in response.json()["error"]["fields"]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "qwen3:8b"}, "endpoint_url"),
        ({"model": "qwen3:8b", "target": "endpoint", "endpoint_url": ""}, "endpoint_url"),
        ({"model": "qwen3:8b", "target": "managed"}, "model_path"),
    ],
)
def test_a_job_without_its_targets_field_names_that_field(body, field, operator, alice_key) -> None:
    fields = _fields(post_json(Client(), "/api/v1/jobs", body, alice_key))
    assert list(fields) == [field]
    assert "Constraint" not in fields[field] and "job_target_complete" not in fields[field]
    assert not BenchmarkJob.objects.exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model": "qwen3\n:8b"}, "model"),
        ({"model": "qwen3\x07:8b"}, "model"),
        ({"model": "m" * 301}, "model"),
        ({"model_path": "/models/a\nb.gguf", "target": "managed"}, "model_path"),
        ({"binary": "llama-server\x1b"}, "binary"),
        ({"suites": ["speed", "tool\ncall"]}, "suites[1]"),
        ({"tasks": ["t" * 121]}, "tasks[0]"),
        ({"launch_flags": ["-fa", "on\x00"]}, "launch_flags[1]"),
        ({"pool": "p" * 65}, "pool"),
        ({"trials": 40000}, "trials"),
        ({"context_length": 2**40}, "context_length"),
    ],
)
def test_a_job_field_a_page_or_column_cannot_hold_is_a_400_naming_it(
    change, field, operator, alice_key
) -> None:
    fields = _fields(post_json(Client(), "/api/v1/jobs", {**JOB, **change}, alice_key))
    assert field in fields, fields
    assert not BenchmarkJob.objects.exists()


def test_a_good_job_is_still_queued(operator, alice_key) -> None:
    response = post_json(Client(), "/api/v1/jobs", JOB, alice_key)
    assert response.status_code == 202, response.content
    job = BenchmarkJob.objects.get()
    assert (job.target, job.binary, job.trials, job.pool) == ("endpoint", "llama-server", 3, "cpu")


def test_the_form_shows_the_missing_url_on_its_field(operator) -> None:
    client = Client()
    client.force_login(operator)
    response = client.post(
        "/lab/jobs/new/",
        {"target": "endpoint", "model": "qwen3\n8b", "provider": "auto", "binary": "x"}
        | {"profile": "smoke", "trials": 3, "harness": "raw", "pool": "cpu", "priority": 5},
    )
    assert response.status_code == 200
    form = response.context["form"]
    assert "endpoint_url" in form.errors and "model" in form.errors
    assert not BenchmarkJob.objects.exists()


@pytest.mark.parametrize("budget", [None, 0, 512, MAX_TOKENS_CEILING])
def test_a_thinking_budget_of_0_to_the_engines_ceiling_or_automatic_is_queued(
    budget, operator, alice_key
) -> None:
    response = post_json(Client(), "/api/v1/jobs", {**JOB, "thinking_budget": budget}, alice_key)
    assert response.status_code == 202, response.content
    assert response.json()["thinking_budget"] == budget
    assert BenchmarkJob.objects.get().thinking_budget == budget


def test_a_job_without_a_thinking_budget_gets_the_automatic_one(operator, alice_key) -> None:
    assert post_json(Client(), "/api/v1/jobs", JOB, alice_key).status_code == 202
    assert BenchmarkJob.objects.get().thinking_budget is None


@pytest.mark.parametrize("budget", [-1, MAX_TOKENS_CEILING + 1, 2**40, "lots", 1.5, True, [8]])
def test_a_thinking_budget_out_of_range_or_not_a_whole_number_is_a_400(
    budget, operator, alice_key
) -> None:
    fields = _fields(
        post_json(Client(), "/api/v1/jobs", {**JOB, "thinking_budget": budget}, alice_key)
    )
    assert list(fields) == ["thinking_budget"], fields
    assert not BenchmarkJob.objects.exists()


def test_the_model_refuses_a_thinking_budget_over_the_engines_ceiling(operator) -> None:
    """Whatever calls the service, and whatever writes the column."""
    with pytest.raises(ValidationError) as refused:
        services.queue_job(requested_by=operator, **JOB, thinking_budget=MAX_TOKENS_CEILING + 1)
    assert refused.value.message_dict == {
        "thinking_budget": [f"At most {MAX_TOKENS_CEILING} tokens."]
    }
    job = services.queue_job(requested_by=operator, **JOB, thinking_budget=MAX_TOKENS_CEILING)
    over = BenchmarkJob.objects.filter(pk=job.pk)
    with pytest.raises(IntegrityError, match="job_thinking_budget_ceiling"), transaction.atomic():
        over.update(thinking_budget=MAX_TOKENS_CEILING + 1)
    assert over.get().thinking_budget == MAX_TOKENS_CEILING


FORM = {"target": "endpoint", "model": "qwen3:8b", "endpoint_url": "http://127.0.0.1:8080"} | {
    "provider": "auto",
    "binary": "llama-server",
    "profile": "smoke",
    "trials": 3,
    "harness": "raw",
    "pool": "cpu",
    "priority": 5,
}


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("thinking_budget", "lots", "Enter a whole number."),
        ("thinking_budget", "1.5", "Enter a whole number."),
        ("thinking_budget", "-1", "Ensure this value is greater than or equal to 0."),
        ("thinking_budget", str(MAX_TOKENS_CEILING + 1), f"At most {MAX_TOKENS_CEILING} tokens."),
        # The engine refuses these answer limits at the worker; the form says so first.
        ("max_tokens", "0", "At least 1 token."),
        ("max_tokens", str(MAX_TOKENS_CEILING + 1), f"At most {MAX_TOKENS_CEILING} tokens."),
    ],
)
def test_the_form_shows_a_bad_output_limit_on_its_field(field, value, error, operator) -> None:
    client = Client()
    client.force_login(operator)
    response = client.post("/lab/jobs/new/", FORM | {field: value})
    assert response.status_code == 200
    assert response.context["form"].errors == {field: [error]}
    assert not BenchmarkJob.objects.exists()


@pytest.mark.parametrize(("budget", "stored"), [("", None), ("0", 0), ("4096", 4096)])
def test_the_form_queues_a_thinking_budget_or_the_automatic_one(budget, stored, operator) -> None:
    client = Client()
    client.force_login(operator)
    page = client.get("/lab/jobs/new/").content.decode()
    assert "Thinking budget" in page and f'max="{MAX_TOKENS_CEILING}"' in page
    response = client.post("/lab/jobs/new/", FORM | {"thinking_budget": budget})
    assert response.status_code == 302, response.context["form"].errors
    assert BenchmarkJob.objects.get().thinking_budget == stored


@pytest.fixture
def running_job(operator) -> BenchmarkJob:
    job = services.queue_job(requested_by=operator, **JOB)
    host = WorkerHost.objects.create(name="h", pools=["cpu"], approved_at=timezone.now())
    return services.claim_job(job_id=job.pk, host=host)


def test_an_endpoints_words_are_stored_whatever_they_hold(running_job) -> None:
    """A NUL or a lone surrogate in an event or an error used to end the job in a DataError."""
    event = {"type": "log", "message": "upstream said \x00\ud800 no", "score": float("nan")}
    assert services.record_event(job_id=running_job.pk, attempt=1, seq=1, event=event)
    assert JobEvent.objects.get().payload == {
        "message": "upstream said \ufffd\ufffd no",
        "score": None,
    }
    services.fail_job(job_id=running_job.pk, attempt=1, error="bad gateway \x00\udc80")
    running_job.refresh_from_db()
    assert running_job.status == "failed" and "\x00" not in running_job.error
    for url in (f"/lab/jobs/{running_job.pk}/", "/lab/jobs/feed.atom", "/lab/"):
        assert_renders(Client(), url)


def test_a_hosts_heartbeat_and_hardware_are_stored_whatever_they_hold() -> None:
    hardware = {"cpu_model": "Xeon\x00 " + "x" * 300, "gpus": [{"name": "RTX\x00 4090"}]}
    host = services.register_host(name="gpu-1", pools=["cpu"], hardware_info=hardware)
    assert host.hardware.cpu_model and "\x00" not in host.hardware_info["cpu_model"]
    inventory = [{"url": "http://127.0.0.1:1/v1", "kind": "openai", "models": ["m\x00", "\ud800"]}]
    services.host_heartbeat(name="gpu-1", inventory=inventory)
    host.refresh_from_db()
    assert host.inventory[0]["models"] == ["m\ufffd", "\ufffd"]


@pytest.mark.parametrize("name", ["", "gpu\n1", "gpu\x001", "h" * 101])
def test_a_lab_host_name_that_cannot_be_one_is_refused_at_registration(name) -> None:
    with pytest.raises(ValueError, match="lab host name"):
        services.register_host(name=name, pools=["cpu"], hardware_info={})
    assert WorkerHost.objects.count() == 2  # only the lab_hosts fixture's


class _Endpoint:
    """An OpenAI-compatible endpoint whose streamed reply holds a NUL (a real server cannot be
    made to say one on demand)."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                delta = {"choices": [{"delta": {"content": "hi\u0000there"}}]}
                self.wfile.write(f"data: {json.dumps(delta)}\n\ndata: [DONE]\n\n".encode())

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.mark.django_db(transaction=True)
def test_a_quick_prompts_reply_is_stored_whatever_the_model_says(operator, agent_for) -> None:
    endpoint = _Endpoint()
    try:
        host = WorkerHost.objects.create(name="h", approved_at=timezone.now())
        quick = services.request_quick_prompt(
            host=host, user=operator, server_url=endpoint.url, model="m", prompt="hello"
        )
        assert prompts.answer_next(agent_for("h"))
    finally:
        endpoint.server.shutdown()
        endpoint.server.server_close()
    quick.refresh_from_db()
    assert quick.status == QuickPrompt.Status.DONE and quick.reply == "hi\ufffdthere"


def test_a_host_claims_only_jobs_sent_to_its_pools_or_its_own_queue(operator) -> None:
    job = services.queue_job(requested_by=operator, **JOB)
    gpu = WorkerHost.objects.create(name="gpu-box", pools=["gpu.4090"], approved_at=timezone.now())
    assert services.claim_job(job_id=job.pk, host=gpu) is None  # a cpu job: not its pool
    cpu = WorkerHost.objects.create(name="cpu-box", pools=["cpu"], approved_at=timezone.now())
    assert services.claim_job(job_id=job.pk, host=cpu).host == cpu
