"""No public page or API response leaks a private field of an uploaded run."""

from __future__ import annotations

import copy
import json
import re
from collections import deque
from itertools import count

import pytest
from django.test import Client

from leaderboard.public import NOTE_FIELDS
from runs.models import Run
from runs.services import refresh_stack_stats
from submissions.models import Submission
from submissions.services import moderate_submission
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db

# Values that must keep their format for the upload to be valid at all.
KEEP = {
    "timestamp",
    "score_schema_version",
    "benchmark_version",
    "manifest_hash",
    "status",
    "benchmark_id",
    "finish_reason",
}
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
}
UPLOADER_IP = "203.0.113.77"
UPLOADER_AGENT = "MARKER-USER-AGENT-4c1d"
HREF = re.compile(r'(?:href|src|hx-get)="(/[^"#]*)"')


def _mark(payload: dict) -> tuple[dict, set[str], set[str]]:
    """Every string becomes a unique marker; returns (payload, private markers, public)."""
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
            marker = f"mk{next(numbers):04d}x"
            if key == "backend":
                marker = f"llamacpp:http://{marker}.internal:8080"
                private.add(marker.split("//")[1].split(".")[0])
                return marker
            # Inside task metadata only the verifier's own notes are public.
            secret = hidden or key in PRIVATE_KEYS or (in_metadata and key not in NOTE_FIELDS)
            (private if secret else public).add(marker)
            return marker
        return value

    return walk(payload), private, public


@pytest.fixture
def marked_run(alice_key, smoke_run, bob) -> tuple[int, set[str], set[str]]:
    payload = copy.deepcopy(smoke_run)
    payload["machine"]["remote_host"] = "secret-host"
    payload["machine"]["user_id"] = "someone"
    payload["profile"] = {"name": "n", "avatar_url": "a", "profile_url": "u"}
    payload["traceback"] = "tb"
    marked, private, public = _mark(payload)
    response = post_json(
        Client(),
        "/api/v1/runs",
        marked,
        alice_key,
        REMOTE_ADDR=UPLOADER_IP,
        HTTP_USER_AGENT=UPLOADER_AGENT,
    )
    assert response.status_code == 201, response.content
    run_id = response.json()["id"]
    moderate_submission(
        submission=Submission.objects.get(run_id=run_id), status="approved", moderator=bob
    )
    refresh_stack_stats(stack_ids=[Run.objects.get(pk=run_id).stack_id])
    return run_id, private, public


def _crawl(client: Client, starts: list[str], limit: int = 250) -> dict[str, str]:
    seen: dict[str, str] = {}
    queue = deque(starts)
    while queue and len(seen) < limit:
        url = queue.popleft()
        if url in seen or url.startswith(("/admin", "/account", "/moderation", "/static/")):
            continue
        response = client.get(url)
        assert response.status_code < 500, url
        body = response.content.decode("utf-8", "replace") if response.status_code == 200 else ""
        seen[url] = body + json.dumps(dict(response.headers))
        for link in HREF.findall(body):
            queue.append(link.replace("&amp;", "&"))
    return seen


def test_private_markers_never_appear_in_public_pages_or_the_api(marked_run) -> None:
    run_id, private, public = marked_run
    stack_id = Run.objects.get(pk=run_id).stack_id
    pages = _crawl(
        Client(),
        [
            "/",
            "/leaderboard/",
            f"/runs/{run_id}/",
            "/api/v1/leaderboard",
            f"/api/v1/runs/{run_id}",
            f"/api/v1/stacks/{stack_id}",
            "/api/v1/hardware",
            "/api/v1/schema/",
        ],
    )
    everything = "\n".join(pages.values())

    assert len(pages) >= 8
    assert len(private) >= 20  # machine ids, endpoints, outputs, errors, metadata, profile
    leaked = sorted(marker for marker in private if marker in everything)
    assert leaked == []
    for secret in (UPLOADER_IP, UPLOADER_AGENT, "secret-host", ".internal:8080"):
        assert secret not in everything
    # The crawl did reach the run: its public strings (the model id at least) are there.
    model_marker = Run.objects.get(pk=run_id).stack.model_id
    assert model_marker in everything
    assert any(marker in everything for marker in public)
