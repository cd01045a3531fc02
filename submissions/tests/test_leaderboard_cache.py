"""The cached leaderboard (HTML and API) changes the moment a moderator publishes or hides a run.

These run on the real Redis cache of the test settings, not the leaderboard tests' memory cache.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from leaderboard.tests.factories import record
from runs.services import refresh_stack_stats
from submissions.intake import import_records
from submissions.models import Status, Submission
from submissions.services import moderate_submission, withdraw_run
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db

PAGES = ["/", "/leaderboard/", "/leaderboard/?vendor=nvidia", "/api/v1/leaderboard"]


def _shows(client: Client, path: str, text: str) -> bool:
    response = client.get(path)
    assert response.status_code == 200
    return text in response.content.decode()


def _run_queries(client: Client, path: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(path).status_code == 200
    return sum('"runs_run"' in q["sql"] for q in queries.captured_queries)


@pytest.fixture
def board() -> None:
    """One published stack, so the board has rows to cache before the upload arrives."""
    result = import_records([record(model_id="llama3.1:8b")])
    refresh_stack_stats(stack_ids=result.stack_ids)


def test_pages_are_served_from_the_cache_until_something_is_published(board) -> None:
    client = Client()
    for path in PAGES:
        assert _shows(client, path, "llama3.1:8b")
        # The second request reads no run rows: the cache answered.
        assert _run_queries(client, path) == 0, path


def test_approving_a_run_shows_it_at_once_and_withdrawing_hides_it(
    board, alice_key, bob, smoke_run
) -> None:
    client = Client()
    for path in PAGES:
        assert not _shows(client, path, "example-model:8b")  # cached now

    response = post_json(client, "/api/v1/runs", smoke_run, alice_key)
    assert response.status_code == 201
    submission = Submission.objects.get(run_id=response.json()["id"])
    assert submission.status != Status.APPROVED  # alice is not trusted
    # Speeds are shown per hardware class and benchmark version: the run's own class (an RTX
    # 4090) on its version shows it, and so does the landing page's newest runs; the default
    # view is llama3.1's machine on the newest version.
    run = submission.run
    own = f"?hw={run.hardware_class.slug}&bv={run.benchmark_version}"
    own_class = f"/leaderboard/{own}"
    all_hardware = f"/leaderboard/?hw=all&bv={run.benchmark_version}"
    pages = [*PAGES, own_class, all_hardware]
    pages.append(f"/api/v1/leaderboard{own}")
    for path in pages:
        assert not _shows(client, path, "example-model:8b"), path

    moderate_submission(submission=submission, status=Status.APPROVED, moderator=bob)
    for path in ["/", *pages[-3:]]:
        assert _shows(client, path, "example-model:8b"), path
    assert _shows(client, pages[-1], f'"id":{submission.run_id},')

    withdraw_run(submission=submission, user=submission.submitter)
    for path in pages:
        assert not _shows(client, path, "example-model:8b"), path
