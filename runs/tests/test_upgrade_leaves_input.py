"""The upgrader copies only what it changes (top-level keys): every later step must leave the
caller's document as it was, since uploads hash and store the body they received."""

from __future__ import annotations

import copy

import pytest

from runs.importers import parse_run_payload
from runs.importers.upgrade import upgrade
from submissions.api import validate_upload
from submissions.models import Channel
from submissions.services import submit_run


def _bundle(smoke_run: dict) -> dict:
    bundle = copy.deepcopy(smoke_run)
    bundle["bundle_schema_version"] = "1.0"
    bundle["status"] = "complete"
    return bundle


@pytest.fixture(params=["bundle-1", "envelope-v3", "run-v3", "run-v2"])
def document(request, smoke_run, envelope, v2_run) -> dict:
    return {
        "bundle-1": lambda: _bundle(smoke_run),
        "envelope-v3": lambda: envelope,
        "run-v3": lambda: smoke_run,
        "run-v2": lambda: v2_run,
    }[request.param]()


def test_upgrading_and_parsing_leave_the_document_as_it_was(document) -> None:
    before = copy.deepcopy(document)
    bundle = upgrade(document).bundle
    bundle["status"] = "changed by a later step"
    parse_run_payload(document)
    assert document == before


@pytest.mark.django_db
def test_a_whole_upload_leaves_the_body_as_it_was(document, alice) -> None:
    before = copy.deepcopy(document)
    outcome = submit_run(
        payload=document,
        upgraded=validate_upload(document),
        channel=Channel.API_KEY,
        submitter=alice,
    )
    assert outcome.created
    assert document == before
