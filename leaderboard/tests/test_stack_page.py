"""The stack page: every approved run, spread, suites, trend, recipe and best-of-N."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils.html import escape

from leaderboard.tests.factories import HOSTILE, add_runs, record
from runs.models import Stack
from submissions.models import Status, Submission

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def _stack() -> Stack:
    runs = add_runs(
        record(overall=70, decode=52, submitter="ada", engine_version="b6000", days_ago=9),
        record(overall=66, decode=61, submitter="grace", engine_version="b6500", days_ago=2),
        record(overall=68, decode=63, submitter="grace", engine_version="b6500"),
        record(
            overall=72,
            decode=55,
            submitter="ada",
            engine_version="b6000",
            days_ago=8,
            command_used="llama-server -m /models/q.gguf --host 10.0.0.7 --port 8080 "
            "--api-key sk-SECRET123 -c 8192 HF_TOKEN=hf_abcdef https://gpu.example.com:9000/v1",
        ),
    )
    return Stack.objects.get(id=runs[0].stack_id)


def test_it_shows_every_run_the_spread_suites_trend_and_recipe(client: Client) -> None:
    stack = _stack()
    response = client.get(f"/stacks/{stack.id}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.count('<td><a href="/runs/') == 4
    assert "Decode tok/s per run, by submitter" in html  # strip chart
    assert "Scores per run" in html
    assert "Decode tok/s by engine version" in html and "b6000" in html and "b6500" in html
    assert "Per-suite scores" in html and "toolcall" in html
    assert "Best of 4:" in html and "ada (imported) 2" in html and "grace (imported) 2" in html
    # The recipe keeps the settings but never an address or a secret.
    assert "-c 8192" in html
    for secret in ("10.0.0.7", "sk-SECRET123", "hf_abcdef", "gpu.example.com"):
        assert secret not in html
    assert "RAWPAYLOADMARKER" not in html
    assert 'property="og:image" content="http://testserver/stacks/' in html


def test_an_htmx_request_gets_only_the_runs_table(client: Client) -> None:
    stack = _stack()
    html = client.get(f"/stacks/{stack.id}/?sort=decode", headers=HTMX).content.decode()
    assert "<html" not in html and html.lstrip().startswith('<section id="results"')
    assert html.index(">63.0") < html.index(">52.0")
    full = client.get(f"/stacks/{stack.id}/?sort=decode").content.decode()
    assert "<html" in full and "Reproduce it" in full


def test_the_query_count_does_not_grow_with_runs(client: Client, django_assert_num_queries) -> None:
    call_command("seed_demo", "--runs", "60", stdout=io.StringIO())
    stack = Stack.objects.order_by("-published_run_count").first()
    few = stack.published_run_count
    with django_assert_num_queries(6):
        client.get(f"/stacks/{stack.id}/")
    with django_assert_num_queries(3):
        client.get(f"/stacks/{stack.id}/", headers=HTMX)
    call_command("seed_demo", "--runs", "1500", stdout=io.StringIO())
    stack.refresh_from_db()
    assert stack.published_run_count > few
    with django_assert_num_queries(6):
        client.get(f"/stacks/{stack.id}/")
    with django_assert_num_queries(3):
        client.get(f"/stacks/{stack.id}/", headers=HTMX)


def test_unpublished_runs_and_stacks_stay_private(client: Client) -> None:
    (run,) = add_runs(record(model_id="hidden:8b"))
    Submission.objects.filter(run=run).update(status=Status.PENDING)
    run.published = False
    run.save(update_fields=["published"])
    from runs.services import refresh_stack_stats

    refresh_stack_stats(stack_ids=[run.stack_id])
    assert client.get(f"/stacks/{run.stack_id}/").status_code == 404
    assert client.get(f"/stacks/{run.stack_id}/share.png").status_code == 404


def test_hostile_submitter_and_hardware_names_are_escaped_in_the_charts(client: Client) -> None:
    (run,) = add_runs(record(submitter=HOSTILE, gpu=f"NVIDIA {HOSTILE}"))
    add_runs(record(submitter="ada"))
    html = client.get(f"/stacks/{run.stack_id}/").content.decode()
    assert "<script>alert(1)</script>" not in html and '"onmouseover=' not in html
    strip = html.split('class="chart-svg strip"')[1].split("</svg>")[0]
    assert escape(HOSTILE)[:20] in strip
