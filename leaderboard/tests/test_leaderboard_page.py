from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(settings, fixtures_dir) -> None:
    settings.BENCHLOOP_FIXTURES_DIR = fixtures_dir
    call_command("seed_demo", stdout=io.StringIO())


def test_the_first_page_lists_ranked_stacks(client: Client, demo) -> None:
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html
    assert html.count('<td class="num rank">') == 50  # one page of stacks
    assert "RTX 4090" in html or "H100" in html
    assert 'hx-headers=\'{"x-csrftoken"' in html
    assert "/static/django_htmx/htmx-2.min.js" in html


def test_an_htmx_request_gets_only_the_results_partial(client: Client, demo) -> None:
    response = client.get("/leaderboard/?scale=speed", headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert html.lstrip().startswith('<section id="results"')
    assert "qwen3.6-0.6b:Q8" in html  # a draft model from leaderboard-v1.json
    assert response.headers["Vary"].count("HX-Request") == 1


def test_legacy_rows_are_on_their_own_scale(client: Client, settings, fixtures_dir) -> None:
    call_command("import_results", str(fixtures_dir / "leaderboard.json"), stdout=io.StringIO())
    call_command(
        "import_results",
        str(fixtures_dir / "generated/v3-smoke-local-run.json"),
        stdout=io.StringIO(),
    )
    ranked = client.get("/leaderboard/").content.decode()
    legacy = client.get("/leaderboard/?scale=v2").content.decode()
    assert "qwen2.5:1.5b" not in ranked
    assert "example-model:8b" in ranked
    assert "qwen2.5:1.5b" in legacy and "example-model:8b" not in legacy
    assert "never ranked against v3 scores" in legacy


def test_sorting_by_decode_speed_orders_the_rows(client: Client, demo) -> None:
    html = client.get("/leaderboard/?sort=decode", headers={"HX-Request": "true"}).content
    import re

    speeds = [
        float(x) for x in re.findall(rb'<td class="num">([\d.]+) <span class="spread">', html)
    ]
    assert len(speeds) >= 40
    assert speeds == sorted(speeds, reverse=True)


def test_the_query_count_does_not_grow_with_rows(
    client: Client, django_assert_num_queries, settings, fixtures_dir
) -> None:
    call_command("seed_demo", "--runs", "60", stdout=io.StringIO())
    with django_assert_num_queries(2):
        client.get("/leaderboard/")
    call_command("seed_demo", "--runs", "600", stdout=io.StringIO())
    with django_assert_num_queries(2):
        client.get("/leaderboard/")


def test_hostile_model_names_are_escaped(client: Client) -> None:
    from datetime import UTC, datetime

    from runs.importers.records import RunRecord, SuiteRecord
    from runs.services import import_records

    import_records(
        [
            RunRecord(
                source_format="run-v3",
                started_at=datetime(2026, 11, 1, tzinfo=UTC),
                model_id='<script>alert(1)</script>"onmouseover=x',
                score_scale="v3",
                comparable=True,
                overall_score=50.0,
                quality_score=50.0,
                speed_score=50.0,
                reliability_score=100.0,
                value_score=10.0,
                suites=[SuiteRecord(suite="toolcall", score=50.0, task_count=1)],
            )
        ]
    )
    html = client.get("/").content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot;onmouseover=x" in html


def test_pages_send_a_strict_content_security_policy(client: Client) -> None:
    csp = client.get("/").headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
