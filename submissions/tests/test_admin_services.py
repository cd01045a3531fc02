"""The admin changes runs only through services: visibility and deletion keep the published
flag, the lanes and the cached board right; stored results are read-only (issue 16)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from leaderboard.tests.factories import add_runs, record
from runs.models import Lane, Run, Stack

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.org", "x" * 16))
    return client


@pytest.fixture
def runs() -> list[Run]:
    return add_runs(*(record(model_id="shown:8b", decode=100 + i) for i in range(3)))


def _lane_runs(stack_id: int) -> int:
    return Lane.objects.get(stack_id=stack_id, hardware_class__isnull=False).run_count


def _change(client: Client, run: Run, visibility: str):
    """The admin's change form as a browser sends it (inline management fields included)."""
    url = f"/admin/runs/run/{run.pk}/change/"
    page = client.get(url).content.decode()
    data = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page))
    data.pop("csrfmiddlewaretoken", None)
    return client.post(url, {**data, "visibility": visibility})


def _board_shows(client: Client, text: str) -> bool:
    return text in client.get("/leaderboard/?hw=rtx-4090-24gb").content.decode()


def test_making_a_run_private_in_the_admin_unpublishes_it_and_updates_its_lane(
    admin_client: Client, runs: list[Run]
) -> None:
    visitor = Client()
    assert _board_shows(visitor, "shown:8b")  # and cached now
    run = runs[0]
    page = admin_client.get(f"/admin/runs/run/{run.pk}/change/")
    assert page.status_code == 200 and 'name="visibility"' in page.content.decode()
    assert 'name="overall_score"' not in page.content.decode()  # results are read-only
    answer = _change(admin_client, run, "private")
    assert answer.status_code == 302, answer.content.decode()[-2000:]
    run.refresh_from_db()
    assert (run.visibility, run.published) == ("private", False)
    assert _lane_runs(run.stack_id) == 2
    assert _change(admin_client, run, "public").status_code == 302
    run.refresh_from_db()
    assert run.published and _lane_runs(run.stack_id) == 3


def test_deleting_runs_in_the_admin_goes_through_the_service(
    admin_client: Client, runs: list[Run]
) -> None:
    visitor = Client()
    assert _board_shows(visitor, "shown:8b")
    stack_id = runs[0].stack_id
    admin_client.post(f"/admin/runs/run/{runs[0].pk}/delete/", {"post": "yes"})
    assert _lane_runs(stack_id) == 2
    ids = [str(r.pk) for r in runs[1:]]
    answer = admin_client.post(
        "/admin/runs/run/", {"action": "delete_selected", "_selected_action": ids, "post": "yes"}
    )
    assert answer.status_code == 302 and not Run.objects.exists()
    assert not Lane.objects.filter(stack_id=stack_id, run_count__gt=0).exists()
    assert Stack.objects.get(pk=stack_id).best_run_id is None
    assert not _board_shows(visitor, "shown:8b")  # the cached board changed with it


def test_stored_results_cannot_be_edited_or_added_in_the_admin(
    admin_client: Client, runs: list[Run]
) -> None:
    stack = Stack.objects.get()
    assert admin_client.get(f"/admin/runs/stack/{stack.pk}/change/").status_code == 200
    answer = admin_client.post(f"/admin/runs/stack/{stack.pk}/change/", {"model_id": "x"})
    assert answer.status_code == 403
    assert Stack.objects.get().model_id == "shown:8b"
    assert admin_client.get("/admin/runs/run/add/").status_code == 403
    assert admin_client.get(f"/admin/runs/stack/{stack.pk}/delete/").status_code == 403
