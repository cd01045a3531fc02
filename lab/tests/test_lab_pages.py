"""Lab pages and API: public queue, live job page, operator-only forms, quick prompts, pulls."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from lab import services
from lab.models import BenchmarkJob, JobEvent, QuickPrompt, WorkerHost
from lab.tests.lab import start_worker, wait_for
from submissions.tests.conftest import post_json
from worker.pull import PullError, needs_pull, pull_model

RECORDED_PULL = Path(__file__).parent / "data" / "ollama-pull-smollm2.ndjson"


@pytest.fixture
def job(db, operator) -> BenchmarkJob:
    return services.queue_job(
        requested_by=operator,
        model="qwen3:8b",
        endpoint_url="http://10.1.2.3:8080/v1",
        api_key_ref="LAB_KEY",
        pool="gpu.4090",
    )


@pytest.mark.django_db
def test_the_public_queue_shows_jobs_but_not_their_endpoints(job) -> None:
    html = Client().get("/lab/").content.decode()
    assert f"#{job.pk}" in html and "qwen3:8b" in html and "gpu.4090" in html
    assert "10.1.2.3" not in html and "LAB_KEY" not in html
    page = Client().get(f"/lab/jobs/{job.pk}/").content.decode()
    assert "10.1.2.3" not in page and "LAB_KEY" not in page
    assert 'hx-trigger="every 2s"' in page
    assert '<meta http-equiv="refresh" content="5">' in page  # refreshes without JavaScript
    api = Client().get(f"/api/v1/jobs/{job.pk}").json()
    assert api["status"] == "queued" and "endpoint_url" not in api
    feed = Client().get("/lab/jobs/feed.atom")
    assert feed.status_code == 200 and feed["Content-Type"].startswith("application/atom+xml")


@pytest.mark.django_db
def test_the_job_partial_polls_until_the_job_is_final(job) -> None:
    htmx = {"HX-Request": "true"}
    live = Client().get(f"/lab/jobs/{job.pk}/", headers=htmx)
    assert live.status_code == 200 and b"<html" not in live.content
    services.record_event(
        job_id=job.pk,
        attempt=0,
        seq=1,
        event={"type": "log", "message": "<script>alert(1)</script>"},
    )
    BenchmarkJob.objects.filter(pk=job.pk).update(status="succeeded", finished_at=timezone.now())
    final = Client().get(f"/lab/jobs/{job.pk}/", headers=htmx)
    assert final.status_code == 286  # htmx stops polling
    assert b"&lt;script&gt;" in final.content and b"<script>alert" not in final.content
    assert b"hx-trigger" not in final.content


@pytest.mark.django_db
def test_only_operators_queue_jobs_and_only_staff_approve_hosts(
    alice, mallory, mallory_key, operator, alice_key
) -> None:
    body = {"model": "m", "endpoint_url": "http://127.0.0.1:8080", "pool": "cpu"}
    assert post_json(Client(), "/api/v1/jobs", body, mallory_key).status_code == 403
    assert post_json(Client(), "/api/v1/jobs", body).status_code == 401
    bad = post_json(Client(), "/api/v1/jobs", {**body, "pool": "Bad Pool!"}, alice_key)
    assert bad.status_code == 400
    assert bad.json()["error"]["fields"][0]["path"] == "pool"
    missing = post_json(Client(), "/api/v1/jobs", {"model": "m", "target": "managed"}, alice_key)
    assert missing.status_code == 400
    assert BenchmarkJob.objects.count() == 0

    other = Client()
    other.force_login(mallory)
    assert other.get("/lab/jobs/new/").status_code == 403
    assert other.get("/lab/hosts/").status_code == 403
    host = WorkerHost.objects.create(name="h1")
    me = Client()
    me.force_login(alice)
    assert me.get("/lab/hosts/").status_code == 200
    assert me.post(f"/lab/hosts/{host.pk}/approve/", {"approved": "1"}).status_code == 404
    alice.is_staff = True
    alice.save()
    assert me.post(f"/lab/hosts/{host.pk}/approve/", {"approved": "1"}).status_code == 302
    host.refresh_from_db()
    assert host.is_approved and host.approved_by == alice


@pytest.mark.django_db
@pytest.mark.usefixtures("lab_hosts")
def test_the_form_queues_a_job(operator) -> None:
    client = Client()
    client.force_login(operator)
    response = client.post(
        "/lab/jobs/new/",
        {
            "target": "endpoint",
            "model": "qwen3:8b",
            "endpoint_url": "http://127.0.0.1:8080",
            "provider": "auto",
            "binary": "llama-server",
            "profile": "smoke",
            "trials": 3,
            "harness": "raw",
            "pool": "gpu.4090",
            "priority": 7,
            "suites_text": "speed, toolcall",
            "launch_flags_text": "-fa on",
        },
    )
    assert response.status_code == 302
    job = BenchmarkJob.objects.get()
    assert (job.pool, job.priority, job.suites) == ("gpu.4090", 7, ["speed", "toolcall"])
    assert response.headers["Location"] == f"/lab/jobs/{job.pk}/"


@pytest.mark.django_db
def test_nobody_else_can_cancel_a_job(job, mallory) -> None:
    other = Client()
    other.force_login(mallory)
    assert other.post(f"/lab/jobs/{job.pk}/cancel/").status_code == 404
    assert Client().post(f"/lab/jobs/{job.pk}/cancel/").status_code == 302  # to sign-in
    job.refresh_from_db()
    assert job.status == "queued"


@pytest.mark.django_db
def test_a_redelivered_message_cannot_run_a_job_twice(job) -> None:
    host = WorkerHost.objects.create(name="h", pools=["gpu.4090"], approved_at=timezone.now())
    assert services.claim_job(job_id=job.pk, host=host).attempts == 1
    assert services.claim_job(job_id=job.pk, host=host) is None  # fresh heartbeat: not stale
    assert services.record_event(job_id=job.pk, attempt=1, seq=1, event={"type": "log"})
    assert not services.record_event(job_id=job.pk, attempt=1, seq=1, event={"type": "log"})
    assert JobEvent.objects.filter(job=job).count() == 1


class RecordedOllama:
    """Replays a recorded /api/pull stream and a tags list (Ollama cannot run on this machine)."""

    def __init__(self, tags: list[str], pull_lines: bytes) -> None:
        outer = self
        self.pulled: list[dict] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps({"models": [{"name": n} for n in tags]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                outer.pulled.append(
                    json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.end_headers()
                for line in pull_lines.splitlines(keepends=True):
                    self.wfile.write(line)
                    self.wfile.flush()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_missing_ollama_model_is_pulled_with_progress_events() -> None:
    ollama = RecordedOllama(["llama3.2:1b"], RECORDED_PULL.read_bytes())
    events: list[dict] = []
    try:
        assert needs_pull(ollama.url, "smollm2:135m")
        assert not needs_pull(ollama.url, "llama3.2:1b")
        pull_model(ollama.url, "smollm2:135m", events.append, min_interval=0)
    finally:
        ollama.close()
    assert ollama.pulled == [{"model": "smollm2:135m", "stream": True}]
    statuses = [e["status"] for e in events]
    assert statuses[0] == "pulling manifest" and statuses[-1] == "success"
    percents = [e["percent"] for e in events if "percent" in e]
    assert percents[:4] == [0.0, 24.8, 74.3, 100.0]
    assert all(e["type"] == "model_pull" for e in events)


def test_a_pull_error_line_fails_clearly() -> None:
    ollama = RecordedOllama(
        [], b'{"status":"pulling manifest"}\n{"error":"pull model manifest: file does not exist"}\n'
    )
    try:
        with pytest.raises(PullError, match="file does not exist"):
            pull_model(ollama.url, "nope:1b", lambda e: None)
    finally:
        ollama.close()


@pytest.mark.llm
@pytest.mark.django_db(transaction=True)
def test_a_quick_prompt_streams_back_with_ttft_and_speed(
    lab_site, tmp_path, operator, llm_url, llm_model
) -> None:
    worker = start_worker(tmp_path, "lab-q", ["cpu.test"], servers=[llm_url], site=lab_site)
    try:
        host = wait_for(
            lambda: WorkerHost.objects.filter(name="lab-q").exclude(inventory=[]).first(),
            60,
            "the host's inventory",
        )
        services.approve_host(host=host, user=None)
        client = Client()
        client.force_login(operator)
        page = client.get(f"/lab/hosts/{host.pk}/").content.decode()
        assert llm_model in page
        response = client.post(
            f"/lab/hosts/{host.pk}/",
            {"server": f"{llm_url}|{llm_model}", "prompt": "Name a colour."},
        )
        assert response.status_code == 302
        quick = wait_for(
            lambda: QuickPrompt.objects.filter(status__in=["done", "failed"]).first(),
            120,
            "the reply",
        )
    finally:
        worker.stop()
    assert quick.status == "done", quick.error
    assert quick.reply and quick.ttft_ms > 0 and quick.decode_tps > 0
    html = client.get(f"/lab/prompts/{quick.pk}/", headers={"HX-Request": "true"})
    assert html.status_code == 286 and b"tok/s" in html.content
