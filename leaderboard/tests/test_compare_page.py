"""Compare: 2–4 stacks, deltas, per-suite scores, distributions and the noise verdict."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils.html import escape

from leaderboard.tests.factories import HOSTILE, add_runs, record
from runs.models import Stack

pytestmark = pytest.mark.django_db


def _two_stacks(noise: float = 0.5) -> tuple[int, int]:
    slow = add_runs(
        *(record(model_id="slow:8b", decode=40 + i * noise, overall=60) for i in range(5))
    )
    fast = add_runs(
        *(record(model_id="fast:8b", decode=60 + i * noise, overall=66) for i in range(5))
    )
    return slow[0].stack_id, fast[0].stack_id


def test_it_shows_deltas_suites_distributions_and_a_noise_verdict(client: Client) -> None:
    a, b = _two_stacks()
    html = client.get(f"/compare/?stacks={a},{b}").content.decode()
    assert "slow:8b" in html and "fast:8b" in html
    assert "+6.0 (+10%)" in html  # overall 66 vs 60
    assert "+20.0 (+50%)" in html  # decode 61 vs 41 (best runs)
    assert "exceeds the noise" in html and "Welch’s t-test" in html
    assert "per-run median decode tok/s" in html
    assert "Per-suite scores" in html and "toolcall" in html
    assert 'class="chart-svg strip"' in html
    assert 'property="og:image" content="http://testserver/compare/share.png?stacks=' in html


def test_a_difference_inside_the_noise_is_called_that(client: Client) -> None:
    a = add_runs(*(record(model_id="a:8b", decode=d) for d in (40, 60, 45, 55)))[0].stack_id
    b = add_runs(*(record(model_id="b:8b", decode=d) for d in (42, 58, 47, 56)))[0].stack_id
    html = client.get(f"/compare/?stacks={a},{b}").content.decode()
    assert "within the noise" in html


def test_ticked_rows_are_redirected_to_one_clean_link(client: Client) -> None:
    a, b = _two_stacks()
    response = client.get(f"/compare/?stacks={a}&stacks={b}&vendor=nvidia&gpu=")
    assert response.status_code == 302
    assert response.url == f"/compare/?stacks={a},{b}&vendor=nvidia"


def test_with_one_stack_it_offers_a_picker(client: Client) -> None:
    a, b = _two_stacks()
    html = client.get(f"/compare/?stacks={a}&find=fast").content.decode()
    assert "Add a stack" in html
    assert f'href="/compare/?stacks={a},{b}"' in html
    assert "slow:8b" in html


def test_the_query_count_does_not_grow_with_runs(client: Client, django_assert_num_queries) -> None:
    call_command("seed_demo", "--runs", "60", stdout=io.StringIO())
    ids = list(Stack.objects.order_by("-published_run_count").values_list("id", flat=True)[:3])
    path = "/compare/?stacks=" + ",".join(map(str, ids))
    with django_assert_num_queries(4):  # stacks, picker, runs, suites
        client.get(path)
    call_command("seed_demo", "--runs", "1500", stdout=io.StringIO())
    with django_assert_num_queries(4):
        client.get(path)
    with django_assert_num_queries(5):  # plus the hardware the filter allows
        client.get(path + "&vendor=nvidia")


def test_hostile_names_are_escaped(client: Client) -> None:
    a = add_runs(record(model_id=HOSTILE, submitter=HOSTILE))[0].stack_id
    b = add_runs(record(model_id="plain:8b"))[0].stack_id
    html = client.get(f"/compare/?stacks={a},{b}").content.decode()
    assert "<script>alert(1)</script>" not in html and '"onmouseover=' not in html
    assert escape(HOSTILE) in html
