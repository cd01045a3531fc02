"""The run page: public receipts for everyone, raw outputs for the owner and moderators."""

from __future__ import annotations

import pytest
from django.test import Client

from leaderboard.tests.factories import add_runs, record
from runs.models import Run, Visibility
from submissions.models import Status, Submission

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(alice) -> Run:
    (created,) = add_runs(
        record(with_tasks=True, command_used="vllm serve m --host 192.168.1.9 --port 8000")
    )
    Submission.objects.filter(run=created).update(submitter=alice)
    return created


def test_anyone_sees_scores_latencies_trials_and_verifier_notes(client: Client, run) -> None:
    html = client.get(f"/runs/{run.id}/").content.decode()
    assert "speed-short-001" in html and "tc-01" in html
    assert "2 trials" in html and "warm-up" in html
    assert "evaluation status:</span> fail" in html
    assert "selection method:</span> median" in html
    for private in ("SECRET MODEL OUTPUT", "PRIVATE ERROR TEXT", "PRIVATE LINE", "private words"):
        assert private not in html
    assert "192.168.1.9" not in html and "RAWPAYLOADMARKER" not in html and "10.1.2.3" not in html


@pytest.mark.parametrize("viewer", ["alice", "bob"])
def test_the_owner_and_moderators_also_see_raw_outputs(
    client: Client, run, viewer, request
) -> None:
    client.force_login(request.getfixturevalue(viewer))
    html = client.get(f"/runs/{run.id}/").content.decode()
    assert "SECRET MODEL OUTPUT" in html and "PRIVATE ERROR TEXT" in html
    assert "because you submitted it or moderate" in html
    assert "RAWPAYLOADMARKER" not in html


def test_another_user_does_not(client: Client, run, mallory) -> None:
    client.force_login(mallory)
    assert "SECRET MODEL OUTPUT" not in client.get(f"/runs/{run.id}/").content.decode()


def test_unpublished_runs_are_hidden_except_from_their_owner(
    client: Client, run, alice, mallory
) -> None:
    Submission.objects.filter(run=run).update(status=Status.PENDING)
    Run.objects.filter(id=run.id).update(published=False)
    assert client.get(f"/runs/{run.id}/").status_code == 404
    client.force_login(mallory)
    assert client.get(f"/runs/{run.id}/").status_code == 404
    client.force_login(alice)
    assert client.get(f"/runs/{run.id}/").status_code == 200


def test_an_approved_unlisted_run_opens_by_link_but_is_not_indexed(client: Client, run) -> None:
    Run.objects.filter(id=run.id).update(published=False, visibility=Visibility.UNLISTED)
    html = client.get(f"/runs/{run.id}/").content.decode()
    assert '<meta name="robots" content="noindex">' in html
    assert client.get(f"/runs/{run.id}/share.png").status_code == 404


def test_the_query_count_does_not_grow_with_tasks(
    client: Client, django_assert_num_queries, fixtures_dir
) -> None:
    from runs.importers import parse_path
    from submissions.intake import import_records

    full = import_records(parse_path(fixtures_dir / "generated/v3-full-local/run.json")).created[0]
    (small,) = add_runs(record(with_tasks=True))
    # run, suites, tasks, trials; and for a run in a lane, its lane in context (two more) and
    # where it stands (its lane's runs, the class's other stacks: two more). The full run has
    # many more tasks but is not comparable (its long-context prompts fell short), so it is in
    # no lane and is placed against nothing.
    for target, count in ((small, 8), (full, 4)):
        with django_assert_num_queries(count):
            client.get(f"/runs/{target.id}/")
