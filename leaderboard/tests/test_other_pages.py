"""Model, hardware and submitter pages; landing and methodology."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils.html import escape

from leaderboard import cache as board_cache
from leaderboard.tests.factories import HOSTILE, add_runs, ensure_lanes, record
from runs.models import Hardware, Stack

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def test_the_landing_page_explains_and_shows_the_newest_verified_results(client: Client) -> None:
    add_runs(record(model_id="selfmade:8b"))
    add_runs(record(model_id="labmade:8b"), verified=True)
    html = client.get("/").content.decode()
    assert "<code>pip install .</code>" in html and "benchloop submit" in html
    assert "Newest verified results" in html
    newest = html.split("Newest verified results")[1]
    assert "labmade:8b" in newest and "selfmade:8b" not in newest
    assert 'href="/methodology/"' in html


def test_the_methodology_page_states_the_formulas(client: Client) -> None:
    html = client.get("/methodology/").content.decode()
    assert "0.70 × quality + 0.25 × speed + 0.05 × reliability" in html
    assert "0.90 × quality + 0.10 × reliability" in html
    assert "0.55 × quality + 0.20 × speed + 0.25 × reliability" in html
    for word in ("pending", "approved", "rejected", "flagged", "withdraw", "trusted"):
        assert word in html
    # Reasoning models: the budget, the token split and the first answer token (issue 17).
    for phrase in (
        "Time to first answer token",
        "thinking budget",
        "<code>--thinking-budget</code>",
    ):
        assert phrase in html, phrase


def test_the_model_page_lists_its_stacks(client: Client, django_assert_num_queries) -> None:
    add_runs(record(quantization="Q4_K_M"), record(quantization="Q8_0", decode=30))
    html = client.get("/models/qwen3:8b/").content.decode()
    assert "<html" in html and html.count('href="/stacks/') >= 2 and "Q8_0" in html
    partial = client.get("/models/qwen3:8b/?page=1", headers=HTMX).content.decode()
    assert "<html" not in partial and partial.lstrip().startswith('<section id="results"')
    assert client.get("/models/nothing:1b/").status_code == 404
    # the page's rows; after a publish, whether demo runs are published (the banner) too
    with django_assert_num_queries(2):
        client.get("/models/qwen3:8b/")
    add_runs(*(record(quantization=f"Q{i}_K", decode=10 + i) for i in range(2, 7)))
    # the page's rows; after a publish, whether demo runs are published (the banner) too
    with django_assert_num_queries(2):
        client.get("/models/qwen3:8b/")


def test_the_hardware_page_is_the_leaderboard_on_one_machine(
    client: Client, django_assert_num_queries
) -> None:
    add_runs(
        record(model_id="on4090:8b"),
        record(model_id="on3060:8b", gpu="NVIDIA GeForce RTX 3060", vram_gb=12),
    )
    hardware = Hardware.objects.get(gpu_model="RTX 4090")
    html = client.get(f"/hardware/{hardware.id}/").content.decode()
    assert "on4090:8b" in html and "on3060:8b" not in html
    partial = client.get(f"/hardware/{hardware.id}/?sort=decode", headers=HTMX).content.decode()
    assert "<html" not in partial and "on4090:8b" in partial
    assert f'href="/leaderboard/export.csv?hardware={hardware.id}&amp;sort=decode"' in partial
    # hardware, its class, the measurement methods in view on each scale (which picks the
    # scale), benchmark versions (cached until the next publish), lanes, page
    board_cache.bump()
    with django_assert_num_queries(8):
        client.get(f"/hardware/{hardware.id}/", headers=HTMX)
    add_runs(*(record(model_id=f"more{i}:8b") for i in range(6)))
    board_cache.bump()
    with django_assert_num_queries(8):
        client.get(f"/hardware/{hardware.id}/", headers=HTMX)


def test_the_submitter_page_lists_their_runs(client: Client, django_assert_num_queries) -> None:
    add_runs(
        record(model_id="by-ada:8b", submitter="ada"), record(model_id="by-bo:8b", submitter="bo")
    )
    html = client.get("/submitters/imported/ada/").content.decode()
    assert "by-ada:8b" in html and "by-bo:8b" not in html
    partial = client.get("/submitters/imported/ada/?sort=overall", headers=HTMX).content.decode()
    assert "<html" not in partial and "by-ada:8b" in partial
    assert client.get("/submitters/nobody/").status_code == 404
    assert client.get("/submitters/imported/nobody/").status_code == 404
    # Links from before imported authors had their own pages still arrive.
    old = client.get("/submitters/ada/")
    assert old.status_code == 301 and old.headers["Location"] == "/submitters/imported/ada/"
    with django_assert_num_queries(2):
        client.get("/submitters/imported/ada/")
    add_runs(*(record(model_id=f"ada{i}:8b", submitter="ada") for i in range(5)))
    with django_assert_num_queries(2):
        client.get("/submitters/imported/ada/")


def test_hostile_names_are_escaped_on_model_hardware_and_submitter_pages(client: Client) -> None:
    (run,) = add_runs(record(model_id=HOSTILE, gpu=f"NVIDIA {HOSTILE}", submitter=HOSTILE))
    stack = Stack.objects.get(id=run.stack_id)
    pages = [
        f"/models/{stack.model_id}/",
        f"/hardware/{run.hardware_id}/",
        f"/submitters/imported/{HOSTILE}/",
        f"/runs/{run.id}/",
        "/",
    ]
    for path in pages:
        response = client.get(path)
        assert response.status_code == 200, path
        html = response.content.decode()
        assert "<script>alert(1)</script>" not in html, path
        assert '"onmouseover=' not in html, path
        assert escape(HOSTILE)[:30] in html, path


def test_list_pages_work_on_the_bulk_dataset(client: Client) -> None:
    call_command("seed_demo", "--runs", "300", stdout=io.StringIO())
    hardware = Hardware.objects.first()
    assert client.get(f"/hardware/{hardware.id}/").status_code == 200
    assert client.get("/submitters/imported/ada/").status_code == 200


# Totals, newest verified and newest runs; the runs per class and scale (from the class
# boards); the default class on v3 and on speed only, the
# measurement methods and the benchmark versions in each view, and the lanes and page of its
# top rows and of the all-hardware top rows; the hardware menu; runs per method (where they
# come from).
LANDING_QUERIES = 15


def test_the_landing_page_query_count_does_not_grow(
    client: Client, django_assert_num_queries
) -> None:
    call_command("seed_demo", "--runs", "60", stdout=io.StringIO())
    ensure_lanes()
    with django_assert_num_queries(LANDING_QUERIES):
        client.get("/")
    call_command("seed_demo", "--runs", "600", stdout=io.StringIO())
    ensure_lanes()
    with django_assert_num_queries(LANDING_QUERIES):
        client.get("/")


def test_the_theme_button_sets_a_cookie_without_javascript(client: Client) -> None:
    response = client.post("/theme/", {"theme": "dark", "next": "/methodology/"})
    assert response.status_code == 302 and response.url == "/methodology/"
    assert '<html lang="en" data-theme="dark">' in client.get("/methodology/").content.decode()
    assert 'value="light"' in client.get("/methodology/").content.decode()
    client.post("/theme/", {"theme": "auto", "next": "https://evil.example/"})
    assert "data-theme" not in client.get("/").content.decode()
    assert client.post("/theme/", {"theme": "auto", "next": "https://evil.example/"}).url == "/"
