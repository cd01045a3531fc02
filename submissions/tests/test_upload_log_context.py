"""Every line logged while an upload is stored carries its client run id, and the run id once
it is stored (worker.rules.logcontext, bound by submissions.api and submissions.services)."""

from __future__ import annotations

import copy
import logging

import pytest
from django.test import Client

from submissions.tests.conftest import post_json
from worker.rules.logcontext import ContextFilter

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged(caplog) -> pytest.LogCaptureFixture:
    """caplog at INFO, each record with the fields bound where it was logged (the filter the
    site's console handler has, settings.LOGGING)."""
    caplog.set_level(logging.INFO)
    caplog.handler.addFilter(ContextFilter())
    return caplog


def _said(logged: pytest.LogCaptureFixture) -> list[tuple[str, str, dict]]:
    return [(r.name, r.getMessage(), r.context) for r in logged.records]


def test_the_upload_lines_carry_the_client_run_id_and_the_run_id(
    alice_key, envelope, logged
) -> None:
    sent = envelope["run"]["source_run_id"]  # the bundle's id: its client run id (upgrade)
    first = post_json(Client(), "/api/v1/runs", envelope, alice_key)
    assert first.status_code == 201
    assert first.json()["client_run_id"] == sent
    run_id = first.json()["id"]
    assert logged.records, "the upload logged nothing"
    assert all(r.context.get("client_run_id") == sent for r in logged.records), _said(logged)
    assert (
        "submissions.services",
        f"upload stored: run {run_id}, pending",
        {"client_run_id": sent, "run_id": run_id},
    ) in _said(logged)

    logged.clear()
    again = post_json(Client(), "/api/v1/runs", envelope, alice_key)
    assert again.status_code == 200
    assert all(r.context.get("client_run_id") == sent for r in logged.records), _said(logged)
    assert (
        "submissions.services",
        f"upload repeats a stored one: run {run_id}, pending",
        {"client_run_id": sent, "run_id": run_id},
    ) in _said(logged)


def test_an_upload_without_a_client_run_id_is_logged_under_the_one_it_is_given(
    alice_key, envelope, logged
) -> None:
    body = copy.deepcopy(envelope)
    for key in ("client_run_id", "source_run_id", "run_id"):
        body["run"].pop(key, None)
    answer = post_json(Client(), "/api/v1/runs", body, alice_key)
    assert answer.status_code == 201, answer.json()
    given = answer.json()["client_run_id"]
    assert given.startswith("content-")
    assert logged.records, "the upload logged nothing"
    assert all(r.context.get("client_run_id") == given for r in logged.records), _said(logged)
    (stored,) = (r for r in logged.records if r.name == "submissions.services")
    assert stored.context == {"client_run_id": given, "run_id": answer.json()["id"]}


def test_the_ids_are_bound_only_while_the_upload_is_stored(alice_key, envelope, logged) -> None:
    post_json(Client(), "/api/v1/runs", envelope, alice_key)
    logging.getLogger("submissions.after").warning("the next request")
    assert logged.records[-1].context == {}
