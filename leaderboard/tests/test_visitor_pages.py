"""Issue 18 (visitors and submitters): the data page, the API link, what an owner's unpublished
run page says, and "Your runs" rows that can be told apart."""

from __future__ import annotations

from django.test import Client

from submissions.models import Status, Submission
from submissions.tests.conftest import post_json


def test_every_page_links_the_api_docs_and_the_data_page(db) -> None:
    page = Client().get("/methodology/").content.decode()
    assert 'href="/api/v1/docs/">API</a>' in page
    assert 'href="/data/"' in page
    assert 'href="/api/v1/schema/"' in page
    assert Client().get("/api/v1/docs/").status_code == 200


def test_the_data_page_lists_exports_and_feeds_for_a_hardware_class(db, demo) -> None:
    from runs.models import HardwareClass

    response = Client().get("/data/")
    assert response.status_code == 200
    page = response.content.decode()
    busiest = max(HardwareClass.objects.all(), key=lambda c: c.runs.filter(published=True).count())
    for url in (
        f"/leaderboard/export.csv?hw={busiest.slug}",
        f"/leaderboard/export.json?hw={busiest.slug}",
        f"/leaderboard/export.md?hw={busiest.slug}",
        f"/leaderboard/feed.atom?hw={busiest.slug}",
        "/api/v1/schema/",
        f"/api/v1/leaderboard?hw={busiest.slug}",
    ):
        assert f'href="{url}"' in page, url
        assert Client().get(url).status_code == 200, url


def test_an_owners_pending_run_says_who_can_see_it(alice_client, alice_key, envelope) -> None:
    run_id = post_json(Client(), "/api/v1/runs", envelope, alice_key).json()["id"]
    assert Submission.objects.get(run_id=run_id).status == Status.PENDING
    assert Client().get(f"/runs/{run_id}/").status_code == 404

    page = alice_client.get(f"/runs/{run_id}/").content.decode()
    assert "Only you and moderators can see it until it is approved" in page
    assert "reachable by its link" not in page and "anyone with its link" not in page


def test_your_runs_rows_show_date_profile_completeness_and_status(
    alice_client, alice_key, envelope
) -> None:
    from runs.models import Run

    run_id = post_json(Client(), "/api/v1/runs", envelope, alice_key).json()["id"]
    run = Run.objects.get(pk=run_id)
    page = alice_client.get("/account/runs/").content.decode()
    row = page[page.index(f'href="/runs/{run_id}/"') :].split("</tr>")[0]
    assert f"run {run_id}" in row
    assert run.started_at.strftime("%Y-%m-%d %H:%M") in row
    assert (run.profile or "—") in row
    assert ">complete<" in row or ">incomplete<" in row or ">failed<" in row
    assert "Pending" in row
