"""Lab jobs that run a harness (issue 19): the form and the API offer the prompt formats and
the real agent programs apart, and a program runs only the matrix suites."""

from __future__ import annotations

import pytest
from django.test import Client

from lab.agents import job_spec
from lab.models import BenchmarkJob
from runs.matrix import MATRIX_SUITES
from submissions.tests.conftest import post_json
from worker.rules.harnesses import HARNESSES

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lab_hosts")]
JOB = {"model": "qwen3:8b", "endpoint_url": "http://127.0.0.1:8080/v1", "pool": "cpu"}
FORM = {"target": "endpoint", "model": "qwen3:8b", "provider": "auto", "binary": "llama-server"}
FORM |= {"endpoint_url": "http://127.0.0.1:8080/v1", "trials": 3, "pool": "cpu", "priority": 5}


def test_the_form_groups_formats_and_programs_under_harness(operator) -> None:
    client = Client()
    client.force_login(operator)
    html = client.get("/lab/jobs/new/").content.decode()
    assert ">Harness<" in html and "Tool-call harness" not in html
    formats = html.split('<optgroup label="Prompt formats">')[1].split("</optgroup>")[0]
    programs = html.split('<optgroup label="Agent programs (matrix suites only)">')[1]
    programs = programs.split("</optgroup>")[0]
    assert all(f'value="{n}"' in formats for n in ("xml-tool-call", "xml-function-call"))
    assert all(f'value="{n}"' in programs for n in ("aider", "hermes-agent", "mini-swe-agent"))
    assert 'value="hermes"' not in html  # the old format name is gone
    offered = set(__import__("re").findall(r'<option value="([^"]+)"', html))
    assert set(HARNESSES) <= offered


def test_a_program_with_a_profile_is_refused_with_a_clear_message(operator) -> None:
    client = Client()
    client.force_login(operator)
    response = client.post(
        "/lab/jobs/new/", FORM | {"profile": "smoke", "harness": "aider", "suites_text": ""}
    )
    assert response.status_code == 200
    errors = response.context["form"].errors["harness"]
    assert "real agent program" in errors[0] and "matrix profile" in errors[0]
    assert not BenchmarkJob.objects.exists()


def test_a_program_on_the_matrix_suites_is_queued_and_sent_to_the_agent(operator) -> None:
    client = Client()
    client.force_login(operator)
    response = client.post(
        "/lab/jobs/new/",
        FORM | {"profile": "", "harness": "aider", "suites_text": ",".join(MATRIX_SUITES)},
    )
    assert response.status_code == 302, response.context["form"].errors
    job = BenchmarkJob.objects.get()
    assert (job.harness, job.suites) == ("aider", list(MATRIX_SUITES))
    # What the agent gets: the harness is in the job's spec (worker.agent.jobs reads it).
    spec = job_spec(job)
    assert spec["harness"] == "aider" and spec["suites"] == list(MATRIX_SUITES)
    assert "harness aider" in client.get(f"/lab/jobs/{job.id}/").content.decode()


def test_the_api_refuses_a_program_off_the_matrix_suites(operator, alice_key) -> None:
    response = post_json(
        Client(),
        "/api/v1/jobs",
        JOB | {"harness": "hermes-agent", "suites": ["toolcall"]},
        alice_key,
    )
    assert response.status_code == 400
    fields = {item["path"]: item["message"] for item in response.json()["error"]["fields"]}
    assert "real agent program" in fields["harness"]
    ok = post_json(
        Client(),
        "/api/v1/jobs",
        JOB | {"harness": "xml-tool-call", "suites": ["toolcall"]},
        alice_key,
    )
    assert ok.status_code == 202, ok.content
    assert BenchmarkJob.objects.get().harness == "xml-tool-call"


def test_the_api_takes_a_prompt_formats_old_name(operator, alice_key) -> None:
    # A script written for the earlier site says "hermes": the tag format, not Hermes Agent.
    ok = post_json(Client(), "/api/v1/jobs", JOB | {"harness": "hermes"}, alice_key)
    assert ok.status_code == 202, ok.content
    assert BenchmarkJob.objects.get().harness == "xml-tool-call"
    refused = post_json(Client(), "/api/v1/jobs", JOB | {"harness": "cursor"}, alice_key)
    assert refused.status_code == 400


def test_a_program_on_the_matrix_profile_is_queued(operator, alice_key) -> None:
    body = JOB | {"harness": "mini-swe-agent", "profile": "matrix"}
    response = post_json(Client(), "/api/v1/jobs", body, alice_key)
    assert response.status_code == 202, response.content
    job = BenchmarkJob.objects.get()
    assert (job.harness, job.profile, job.suites) == ("mini-swe-agent", "matrix", [])
    assert job_spec(job)["harness_variant"] == ""


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"harness": "raw", "harness_variant": "whole"}, "agent program only"),
        (
            {"harness": "mini-swe-agent", "profile": "matrix", "harness_variant": "no-such"},
            "has no variant 'no-such'",
        ),
    ],
)
def test_a_variant_the_engine_does_not_know_is_refused_on_its_field(
    body, message, operator, alice_key
) -> None:
    response = post_json(Client(), "/api/v1/jobs", JOB | body, alice_key)
    assert response.status_code == 400
    fields = {item["path"]: item["message"] for item in response.json()["error"]["fields"]}
    assert message in fields["harness_variant"]
    assert not BenchmarkJob.objects.exists()


def test_a_known_variant_reaches_the_agents_spec(operator, alice_key) -> None:
    from worker.engine.matrix.adapters import variants

    known = sorted(variants("aider"))
    assert known == ["diff", "whole"]
    body = JOB | {"harness": "aider", "profile": "matrix", "harness_variant": known[0]}
    response = post_json(Client(), "/api/v1/jobs", body | {"max_tokens": 256}, alice_key)
    assert response.status_code == 202, response.content
    assert job_spec(BenchmarkJob.objects.get())["harness_variant"] == known[0]
    # The job's own answer, and a later look at it, say how it will run.
    again = Client().get(f"/api/v1/jobs/{response.json()['id']}").json()
    for shown in (response.json(), again):
        assert (shown["harness"], shown["harness_variant"]) == ("aider", known[0])
        assert (shown["max_tokens"], shown["thinking_budget"]) == (256, None)
