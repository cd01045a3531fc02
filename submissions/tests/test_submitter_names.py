"""Accounts, imported authors and "anonymous" never share a public page or a display name."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.test import Client

from leaderboard.tests.factories import add_runs, record
from runs.importers import public_fields
from runs.names import skeleton
from submissions.models import Status, Submission
from submissions.services import create_api_key, moderate_submission
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db


def _approved_upload(user: User, payload: dict) -> int:
    key = create_api_key(user=user, name="k", scopes=["submit"])[1]
    run_id = post_json(Client(), "/api/v1/runs", payload, key).json()["id"]
    moderate_submission(
        submission=Submission.objects.get(run_id=run_id), status=Status.APPROVED, moderator=None
    )
    return run_id


def test_an_account_named_like_an_imported_author_never_merges_into_their_page(
    smoke_run,
) -> None:
    (imported,) = add_runs(record(model_id="imported-ada:8b", submitter="ada"))
    # An account that already had the name (sign-up refuses it now): still its own page.
    ada = User.objects.create_user("ada", "ada@example.org", "pw-pw-pw-1")
    own = _approved_upload(ada, smoke_run)

    account_page = Client().get("/submitters/ada/").content.decode()
    imported_page = Client().get("/submitters/imported/ada/").content.decode()
    assert f"/runs/{own}/" in account_page and f"/runs/{imported.id}/" not in account_page
    assert f"/runs/{imported.id}/" in imported_page and f"/runs/{own}/" not in imported_page
    assert "ada (imported)" in imported_page and "not an account" in imported_page

    # Each run credits its own submitter, with a link to the right page.
    imported_run = Client().get(f"/runs/{imported.id}/").content.decode()
    assert '<a href="/submitters/imported/ada/">ada (imported)</a>' in imported_run
    own_run = Client().get(f"/runs/{own}/").content.decode()
    assert '<a href="/submitters/ada/">ada</a>' in own_run
    api = Client().get(f"/api/v1/runs/{imported.id}").json()
    assert api["submitter"] == "ada (imported)"


def test_anonymous_runs_have_no_page_an_account_could_take(smoke_run) -> None:
    response = Client().post(
        "/submit", smoke_run, content_type="application/json", REMOTE_ADDR="192.0.2.55"
    )
    assert response.status_code == 200, response.content
    run_id = response.json()["id"]
    moderate_submission(
        submission=Submission.objects.get(run_id=run_id), status=Status.APPROVED, moderator=None
    )
    User.objects.create_user("anonymous", "anon@example.org", "pw-pw-pw-1")  # from before
    page = Client().get(f"/runs/{run_id}/").content.decode()
    assert "by anonymous" in page and "/submitters/anonymous/" not in page
    assert Client().get("/submitters/anonymous/").status_code == 404


def test_an_import_credited_to_anonymous_is_credited_to_nobody() -> None:
    for name in ("anonymous", "Anonymous", "ANONYMOUS ", "аnonymous"):
        assert public_fields(record(submitter=name)).submitter_name == ""
    assert public_fields(record(submitter="ada")).submitter_name == "ada"


def test_the_data_migration_forgets_stored_anonymous_names() -> None:
    runs = add_runs(*(record(model_id=f"m{i}:8b", submitter="x") for i in range(3)))
    for run, name in zip(runs, ("Anonymous", "аnonymous", "ada"), strict=True):
        Submission.objects.filter(run=run).update(submitter_name=name)
    migration = importlib.import_module("submissions.migrations.0007_anonymous_is_nobody")
    migration.forget_anonymous_names(apps, None)
    names = dict(Submission.objects.values_list("run_id", "submitter_name"))
    assert [names[run.id] for run in runs] == ["", "", "ada"]


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("anonymous", "ANONYMOUS"),
        ("anonymous", "аnonymous"),  # Cyrillic а
        ("anonymous", "an0nym0us"),
        ("anonymous", "ａｎｏｎｙｍｏｕｓ"),  # fullwidth
        ("alice", "aIice"),
        ("alice", "al1ce"),
        ("Eric", "ERIC"),
        ("Éric", "eric"),
        ("modern", "modem"),
        ("ada lovelace", "ada_lovelace"),
    ],
)
def test_names_that_look_alike_share_a_skeleton(one: str, other: str) -> None:
    assert skeleton(one) == skeleton(other)


def test_different_names_keep_different_skeletons() -> None:
    assert len({skeleton(n) for n in ("ada", "bob", "eric", "erin", "anon", "alex")}) == 6
