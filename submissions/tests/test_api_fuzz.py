"""Schemathesis fuzzes every operation in /api/v1/schema/, as each kind of caller: nobody, an
operator's key, another user's key, a wrong key and a signed-in browser session. No answer may
be a 5xx, and every answer must have a documented status, content type and body shape.

The run is bounded (MAX_EXAMPLES per operation and caller) and deterministic, so CI stays
well under a minute and a failure reproduces. For a deeper local run raise
BENCHLOOP_FUZZ_EXAMPLES and set BENCHLOOP_FUZZ_DEEP=1 (adds the boundary-value phase).
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from lab import services as lab
from runs.models import Run
from submissions.services import create_api_key

MAX_EXAMPLES = int(os.environ.get("BENCHLOOP_FUZZ_EXAMPLES", "12"))
DEEP = os.environ.get("BENCHLOOP_FUZZ_DEEP") == "1"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    # The schema is the truth both ways: a request it calls valid is not refused as malformed,
    # and an operation that declares a key needs one.
    positive_data_acceptance,
    ignored_auth,
]
UPLOAD = ["2xx", "400", "401", "403", "404", "409", "413", "422", "429"]
CALLERS = ["anonymous", "operator", "other-user", "wrong-key", "session"]
CONFIG = {
    "generation": {
        "max-examples": MAX_EXAMPLES,
        "deterministic": True,
        "database": "none",
        "mode": "all",
    },
    # The coverage phase (every boundary value of every parameter) takes minutes: opt in.
    "phases": {"coverage": {"enabled": DEEP}, "stateful": {"enabled": False}},
    "suppress-health-check": ["all"],
    "operations": [
        {
            # RFC 8628: every poll that gets no token is a 400 whose body says why (a code
            # nobody issued is invalid_grant), as the operation's 400 declares.
            "include-path": "/api/v1/device/token",
            "checks": {
                "positive_data_acceptance": {"expected-statuses": ["200", "400", "413", "429"]}
            },
        },
    ]
    # The uploads and the job queue take any JSON object in the schema's words; what makes one
    # valid is the upload JSON Schema (/api/v1/schemas/upload-1.json) and the site's state (an
    # approved host for the pool): their 400 and 422 name the fields.
    + [
        {
            "include-path": path,
            "checks": {"positive_data_acceptance": {"expected-statuses": UPLOAD}},
        }
        for path in ("/api/v1/runs", "/api/v1/runs/external", "/api/v1/jobs", "/submit")
    ],
}


class _App:
    """Django's WSGI app, minus the per-request connection recycling that the test client
    also switches off: it would close the connection holding the test's transaction."""

    def __init__(self) -> None:
        self.handler = WSGIHandler()

    def __call__(self, environ, start_response):
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            return self.handler(environ, start_response)
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)


def _load_schema():
    """The schema exactly as /api/v1/schema/ serves it (fetched at collection: no database)."""
    return schemathesis.openapi.from_wsgi(
        "/api/v1/schema/", _App(), config=SchemathesisConfig.from_dict(CONFIG)
    )


schema = _load_schema()


@pytest.fixture
def api_schema():
    return schema


@pytest.fixture
def published(db, smoke_run, bob):
    """Something real behind the ids: an approved run and its stack, and a job."""
    from submissions.models import Submission
    from submissions.services import moderate_submission
    from submissions.tests.conftest import post_json

    owner_key = create_api_key(user=bob, name="bob", scopes=["submit", "read"])[1]
    run_id = post_json(Client(), "/api/v1/runs", smoke_run, owner_key).json()["id"]
    # Nobody moderates their own run: bob's upload is approved as an automatic decision.
    moderate_submission(
        submission=Submission.objects.get(run_id=run_id), status="approved", moderator=None
    )
    job = lab.queue_job(requested_by=bob, model="m", endpoint_url="http://10.0.0.1/v1")
    return {"run": Run.objects.get(pk=run_id), "job": job}


@pytest.fixture
def callers(operator, alice_key, mallory, mallory_key, published) -> dict[str, dict]:
    """What each kind of caller sends: headers, or a session cookie."""
    browser = Client()
    browser.force_login(mallory)
    return {
        "anonymous": {},
        "operator": {"headers": {"Authorization": f"Bearer {alice_key}"}},
        "other-user": {"headers": {"Authorization": f"Bearer {mallory_key}"}},
        "wrong-key": {"headers": {"Authorization": f"Bearer {alice_key[:11]}{'x' * 40}"}},
        "session": {"cookies": {"sessionid": browser.cookies["sessionid"].value}},
    }


@pytest.mark.django_db
@schema.parametrize()
def test_every_operation_answers_as_documented(case, callers) -> None:
    for sends in callers.values():
        case.call_and_validate(checks=CHECKS, **sends)


@pytest.mark.django_db
@pytest.mark.parametrize("who", CALLERS)
def test_real_objects_answer_as_documented(api_schema, published, callers, who) -> None:
    """Fuzzed ids rarely exist; fetch the real ones so the 200 bodies are checked too."""
    run, job = published["run"], published["job"]
    for path, ids in (
        ("/api/v1/runs/{id}", run.pk),
        ("/api/v1/stacks/{id}", run.stack_id),
        ("/api/v1/jobs/{id}", job.pk),
    ):
        case = api_schema[path]["GET"].Case(path_parameters={"id": ids})
        response = case.call_and_validate(checks=CHECKS, **callers[who])
        assert response.status_code == (401 if who == "wrong-key" else 200), path
    for path in ("/api/v1/leaderboard", "/api/v1/hardware"):
        case = api_schema[path]["GET"].Case(query={"scale": "v3"} if "leader" in path else {})
        assert case.call_and_validate(checks=CHECKS, **callers[who]).status_code < 500


# --- regressions found while fuzzing (each was a 500) -----------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("where", "value", "path"),
    [
        ("machine.gpu", "\ud800", "machine.gpu"),
        ("metadata-value", "o\u0000", "suites.speed.tasks[0].metadata.note"),
        ("metadata-key", "key\u0000", "suites.speed.tasks[0].metadata"),
    ],
)
def test_text_no_database_can_hold_is_refused_with_its_path(
    alice_key, smoke_run, where, value, path
) -> None:
    from submissions.tests.conftest import post_json

    metadata = smoke_run["suites"]["speed"]["tasks"][0]["metadata"]
    if where == "machine.gpu":
        smoke_run["machine"]["gpu"] = value
    elif where == "metadata-value":
        metadata["note"] = value
    else:
        metadata[value] = "x"
    response = post_json(Client(), "/api/v1/runs", smoke_run, alice_key)
    assert response.status_code == 400
    assert response.json()["error"]["fields"][0]["path"] == path
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_a_nul_in_the_url_is_a_400_not_a_500() -> None:
    client = Client()
    api = client.get("/api/v1/leaderboard?q=%00")
    assert api.status_code == 400 and api.json()["error"]["code"] == "bad_request"
    for url in ("/leaderboard/?q=%00", "/models/a%00b/", "/submitters/a%00/", "/compare/?x=%00"):
        assert client.get(url).status_code == 400, url
    unknown = client.get("/api/v1/no-such-thing")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"


# --- the schema is the truth (issue 31, defect 13) -------------------------------------------


@pytest.mark.django_db
def test_an_operation_declares_a_key_only_where_one_is_needed(api_schema, published) -> None:
    """Each GET answered without a key declares that no key is needed (an empty security
    requirement); one that refuses callers without a key does not."""
    ids = {
        "/api/v1/runs/{id}": published["run"].pk,
        "/api/v1/runs/{id}/standing": published["run"].pk,
        "/api/v1/runs/{id}/state": published["run"].pk,
        "/api/v1/stacks/{id}": published["run"].stack_id,
        "/api/v1/jobs/{id}": published["job"].pk,
    }
    queries = {"/api/v1/matrix": {"model": "m", "hw": "x"}}
    seen = set()
    for path, methods in api_schema.raw_schema["paths"].items():
        if "get" not in methods:
            continue
        case = api_schema[path]["GET"].Case(
            path_parameters={"id": ids[path]} if "{id}" in path else {},
            query=queries.get(path, {}),
        )
        answer = case.call()
        public = {} in methods["get"].get("security", [{}])
        assert answer.status_code not in (401, 403) if public else answer.status_code == 401, (
            path,
            answer.status_code,
        )
        seen.add((path, public))
    assert ("/api/v1/leaderboard", True) in seen and ("/api/v1/runs/{id}/state", False) in seen


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body", [{"device_code": ""}, {"device_code": "never-issued"}, {"grant_type": "x"}]
)
def test_a_poll_without_a_token_answers_the_declared_400(api_schema, body) -> None:
    case = api_schema["/api/v1/device/token"]["POST"].Case(body=body, media_type="application/json")
    answer = case.call_and_validate(checks=CHECKS)
    assert answer.status_code == 400
    assert answer.json()["error"] in ("invalid_request", "invalid_grant", "unsupported_grant_type")
