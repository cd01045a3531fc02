"""No public page or API response leaks a private field of an uploaded run."""

from __future__ import annotations

import copy
import json
import re
from collections import deque
from itertools import count

import pytest
from django.test import Client

from lab import notifications, services
from lab.models import BenchmarkJob, WorkerHost
from leaderboard.views import images
from runs.models import Run
from runs.public import NOTE_FIELDS
from runs.services import refresh_stack_stats
from submissions.models import Submission
from submissions.services import moderate_submission
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db

# Values that must keep their format for the upload to be valid at all.
KEEP = {
    "timestamp",
    "score_schema_version",
    "status",
    "version",
    "bundle_schema_version",
    "manifest_hash",
    "suite",
}
# What a stored string can carry that no visitor may see: every public string field of the
# marked upload carries one of these after its own public marker.
PRIVATE_VALUES = [
    "10.77.3.9",
    "10.77.3.10:8080",
    "fe80::1",
    "2001:db8::5",
    "[::1]:11434",
    "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
    "gpu-box-7:11434",
    "--rpc 10.77.4.1:50052",
    "--rpc rpcbox:50052",
    "https://bob:hunter2@api.example.org/v1",
    "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJlMQ",
    "bl_Zq8wN3vT5yR7uP1oK4mJ6hG2",
    "sk-proj-9fQ2xL7vB4nM8kR1tY6wE3",
    "/home/zelda7/models/m.gguf",
    "/Users/zelda7/models",
    "~zelda7/models",
    "priv.contact@example.org",
    "buildbox.corp.internal",
]
# For fields of 20 characters or less, after a 7-character marker.
SHORT_PRIVATE = ["fe80::1", "10.77.3.9", "::1", "~zelda7/"]
# The private part of each value, as it would appear if it leaked.
LEAK_NEEDLES = [
    "10.77.3.9",
    "10.77.3.10",
    "10.77.4.1",
    "fe80::1",
    "2001:db8::5",
    "::1]",
    "2001:0db8:85a3",
    "8a2e:0370:7334",
    "gpu-box-7",
    "rpcbox",
    "hunter2",
    "api.example.org",
    "eyJhbGciOiJIUzI1NiJ9",
    "bl_Zq8wN3vT5yR7uP1oK4mJ6hG2",
    "sk-proj-9fQ2xL7vB4nM8kR1tY6wE3",
    "zelda7",
    "priv.contact",
    "buildbox",
]
PRIVATE_KEYS = {
    "machine_id",
    "endpoint",
    "remote_host",
    "output",
    "error",
    "traceback",
    "user_id",
    "avatar_url",
    "profile_url",
    "hostname",
}
UPLOADER_IP = "203.0.113.77"
UPLOADER_AGENT = "MARKER-USER-AGENT-4c1d"
HREF = re.compile(r'(?:href|src|hx-get)="(/[^"#]*)"')


def _mark(payload: dict, short: frozenset = frozenset()) -> tuple[dict, set[str], set[str]]:
    """Every string becomes a unique marker followed by one of the private values (a short
    one for the keys in `short`, whose columns are narrow); returns (payload, private
    markers, public markers)."""
    numbers = count()
    private: set[str] = set()
    public: set[str] = set()

    def walk(value, key: str = "", hidden: bool = False, in_metadata: bool = False):
        if isinstance(value, dict):
            return {
                k: walk(
                    v,
                    k,
                    hidden or k in PRIVATE_KEYS or (key == "" and k == "profile"),
                    in_metadata or k == "metadata",
                )
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [walk(v, key, hidden, in_metadata) for v in value]
        if isinstance(value, str) and key not in KEEP:
            number = next(numbers)
            marker = f"mk{number:04d}x"
            if key == "backend":
                marker = f"llamacpp:http://{marker}.internal:8080"
                private.add(marker.split("//")[1].split(".")[0])
                return marker
            # Inside task metadata only the verifier's own notes are public.
            secret = hidden or key in PRIVATE_KEYS or (in_metadata and key not in NOTE_FIELDS)
            (private if secret else public).add(marker)
            if key in short:
                return f"{marker}{SHORT_PRIVATE[number % len(SHORT_PRIVATE)]}"
            return f"{marker} {PRIVATE_VALUES[number % len(PRIVATE_VALUES)]}"
        return value

    return walk(payload), private, public


@pytest.fixture
def marked_run(alice_key, smoke_run, bob) -> tuple[int, set[str], set[str]]:
    payload = copy.deepcopy(smoke_run)
    payload["machine"]["remote_host"] = "secret-host"
    payload["machine"]["user_id"] = "someone"
    payload["profile"] = {"name": "n", "avatar_url": "a", "profile_url": "u"}
    payload["traceback"] = "tb"
    payload["machine"]["hostname"] = "host"
    payload["command_used"] = (
        "llama-server -m /home/zelda7/models/m.gguf --rpc 10.77.4.1:50052,rpcbox:50052"
        " --host fe80::1 --port 8080 --api-key bl_Zq8wN3vT5yR7uP1oK4mJ6hG2"
    )
    for suite in payload["suites"].values():
        for task in suite.get("tasks", []):
            task.setdefault("metadata", {})["note"] = "verifier note"
            task["metadata"]["checks"] = {"reached 10.77.3.9": True}
    short: set[str] = set()
    for _attempt in range(6):
        marked, private, public = _mark(payload, frozenset(short))
        response = post_json(
            Client(),
            "/api/v1/runs",
            marked,
            alice_key,
            REMOTE_ADDR=UPLOADER_IP,
            HTTP_USER_AGENT=UPLOADER_AGENT,
        )
        if response.status_code != 400:
            break
        # A field too narrow for a long private value gets a short one on the next try.
        narrow = {
            re.sub(r"\[\d+\]", "", field["path"]).rsplit(".", 1)[-1]
            for field in response.json()["error"]["fields"]
            if "too long" in field["message"] or "longer than" in field["message"]
        }
        assert narrow - short, response.content
        short |= narrow
    assert response.status_code == 201, response.content
    run_id = response.json()["id"]
    moderate_submission(
        submission=Submission.objects.get(run_id=run_id), status="approved", moderator=bob
    )
    refresh_stack_stats(stack_ids=[Run.objects.get(pk=run_id).stack_id])
    return run_id, private, public


# What an endpoint's own error said (the leak the review found through the lab's pages).
ENDPOINT_ERROR = (
    "upstream https://bob:hunter2@api.example.org/v1 answered 502 via 10.77.3.10:8080;"
    " retried [::1]:11434 and fe80::1 and gpu-box-7:11434 with Bearer"
    " eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJlMQ (key sk-proj-9fQ2xL7vB4nM8kR1tY6wE3,"
    " log /home/zelda7/lab.log, mail priv.contact@example.org, host buildbox.corp.internal)"
)


@pytest.fixture
def marked_job(operator) -> BenchmarkJob:
    """A failed lab job whose every text field, event and error carries private values."""
    job = services.queue_job(
        requested_by=operator,
        model="mkjob1x /home/zelda7/models/m.gguf",
        endpoint_url="http://10.77.3.9:8080/v1",
        api_key_ref="LAB_KEY",
        pool="gpu.4090",
        tasks=["speed-p128-* 2001:db8::5"],
        suites=["speed"],
    )
    host = WorkerHost.objects.create(
        name="mkhost1x-10.77.3.9", pools=["gpu.4090"], approved_at=job.created_at
    )
    claimed = services.claim_job(job_id=job.pk, host=host)
    assert claimed is not None
    events = [
        {"type": "run_started", "total_tasks": 2, "suites": ["speed fe80::1"]},
        {"type": "suite_started", "suite": "speed"},
        {"type": "task_started", "task_id": "mkjob2x gpu-box-7:11434"},
        {"type": "log", "message": f"mkjob3x {ENDPOINT_ERROR}"},
        {"type": "model_pull", "status": "pulling from http://10.77.3.10:8080"},
        {"type": "run_failed", "error": ENDPOINT_ERROR},
    ]
    for seq, event in enumerate(events, start=1):
        services.record_event(job_id=job.pk, attempt=claimed.attempts, seq=seq, event=event)
    return services.fail_job(job_id=job.pk, attempt=claimed.attempts, error=ENDPOINT_ERROR)


# A page's CSRF token is 64 random letters and digits, made afresh per session: a short needle
# (a four-letter username) turns up in one of hundreds of them by chance, so they are blanked.
CSRF_TOKEN = re.compile(r'(csrfmiddlewaretoken" value="|"x-csrftoken": "|csrftoken=)[A-Za-z0-9]+')


def _crawl(client: Client, starts: list[str], limit: int = 250) -> dict[str, str]:
    """Public pages reached from `starts`: {url: body and headers, CSRF tokens blanked}."""
    seen: dict[str, str] = {}
    queue = deque(starts)
    while queue and len(seen) < limit:
        url = queue.popleft()
        if url in seen or url.startswith(("/admin", "/account", "/moderation", "/static/")):
            continue
        response = client.get(url)
        assert response.status_code < 500, url
        body = response.content.decode("utf-8", "replace") if response.status_code == 200 else ""
        seen[url] = CSRF_TOKEN.sub(r"\1<token>", body + json.dumps(dict(response.headers)))
        for link in HREF.findall(body):
            queue.append(link.replace("&amp;", "&"))
    return seen


def _leaks(pages: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """Each private value found, with up to two pages and the text around it."""
    found = {}
    for needle in LEAK_NEEDLES:
        hits = [(url, body) for url, body in pages.items() if needle in body][:2]
        if hits:
            found[needle] = [
                (url, body[max(body.find(needle) - 60, 0) : body.find(needle) + 30])
                for url, body in hits
            ]
    return found


def test_private_markers_never_appear_in_public_pages_or_the_api(
    marked_run, marked_job, monkeypatch
) -> None:
    run_id, private, public = marked_run
    stack_id = Run.objects.get(pk=run_id).stack_id
    # A share image is a PNG: record the text each one draws, as it goes to the renderer.
    drawn: list[str] = []
    real_png = images._png

    def recording_png(card):
        drawn.append(card.text())
        return real_png(card)

    monkeypatch.setattr(images, "_png", recording_png)
    pages = _crawl(
        Client(),
        [
            "/",
            "/leaderboard/",
            f"/runs/{run_id}/",
            f"/stacks/{stack_id}/",
            "/leaderboard/export.csv",
            "/leaderboard/export.json",
            "/leaderboard/export.md",
            "/leaderboard/feed.atom",
            "/api/v1/leaderboard",
            f"/api/v1/runs/{run_id}",
            f"/api/v1/stacks/{stack_id}",
            "/api/v1/hardware",
            "/api/v1/schema/",
            "/lab/",
            f"/lab/jobs/{marked_job.pk}/",
            "/lab/jobs/feed.atom",
            f"/api/v1/jobs/{marked_job.pk}",
            f"/runs/{run_id}/share.png",
            f"/stacks/{stack_id}/share.png",
        ],
    )
    assert len(drawn) >= 2
    pages["share images"] = "\n".join(drawn)
    # The job page's live partial, as htmx asks for it.
    partial = Client().get(f"/lab/jobs/{marked_job.pk}/", headers={"HX-Request": "true"})
    pages["job partial"] = partial.content.decode()
    everything = "\n".join(pages.values())

    assert len(pages) >= 17
    assert len(private) >= 20  # machine ids, endpoints, outputs, errors, metadata, profile
    leaked = sorted(marker for marker in private if marker in everything)
    assert leaked == []
    assert _leaks(pages) == {}
    for secret in (UPLOADER_IP, UPLOADER_AGENT, "secret-host", ".internal:8080"):
        assert secret not in everything
    # The crawl did reach the run: its public strings (the model id at least) are there.
    model_marker = Run.objects.get(pk=run_id).stack.model_id
    assert model_marker in everything
    assert model_marker.split()[0] in pages["share images"]
    assert any(marker in everything for marker in public)
    # ... and the job: its public words are there, its error with the addresses taken out.
    for word in ("mkjob1x", "mkjob3x", "mkhost1x", "answered 502 via"):
        assert word in pages[f"/lab/jobs/{marked_job.pk}/"], word
    assert "answered 502 via" in pages["/lab/jobs/feed.atom"]
    assert "answered 502 via" in pages[f"/api/v1/jobs/{marked_job.pk}"]


def test_job_notifications_carry_no_private_values(marked_job, mailoutbox) -> None:
    notifications.notify_finished(marked_job.pk)
    body = json.dumps(notifications.job_payload(marked_job))
    mail = mailoutbox[0].subject + mailoutbox[0].body
    assert "answered 502 via" in body and "answered 502 via" in mail
    assert _leaks({"webhook": body, "email": mail}) == {}


def test_the_requester_and_operators_see_the_raw_error_and_no_one_else(
    marked_job, alice_client, mallory
) -> None:
    page = f"/lab/jobs/{marked_job.pk}/"
    assert "hunter2" in alice_client.get(page).content.decode()  # alice asked for the job
    mallory_client = Client()
    mallory_client.force_login(mallory)
    for client in (Client(), mallory_client):
        assert "hunter2" not in client.get(page).content.decode()
        assert "hunter2" not in client.get(f"/api/v1/jobs/{marked_job.pk}").content.decode()
