"""The leaderboard page on the demo data (seed_demo), seeded once for the module: these tests
only read it (conftest.demo_once). The board's other behaviour is in test_leaderboard_page.py."""

from __future__ import annotations

import re

import pytest
from django.db.models import Count
from django.test import Client

from runs.models import Lane, Run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("demo_once")]
HTMX = {"HX-Request": "true"}


def _hardware(html: str) -> list[str]:
    """Hardware class labels of the table rows, in order."""
    return re.findall(r'<td class="col-hardware"><a href="[^"]*">([^<]*)</a>', html)


def _default_class_lanes() -> int:
    """Lanes, on the newest benchmark version, of the class with the most comparable v3 runs."""
    top = (
        Run.objects.published()
        .filter(score_scale="v3", comparable=True)
        .values("hardware_class_id")
        .annotate(n=Count("id"))
        .order_by("-n")
        .first()
    )
    return Lane.objects.filter(
        hardware_class_id=top["hardware_class_id"], score_scale="v3", benchmark_version="3.1.0"
    ).count()


def test_the_full_page_has_the_layout_and_one_page_of_ranked_stacks(client: Client) -> None:
    response = client.get("/leaderboard/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" in html and 'id="board-filters"' in html
    # The default view: the lanes of the hardware class with the most runs, one class only.
    assert html.count('<td class="num rank">') == min(50, _default_class_lanes())
    hardware = _hardware(html)
    assert len(set(hardware)) == 1 and f"On {hardware[0]}" in html
    assert 'hx-headers=\'{"x-csrftoken"' in html
    assert "/static/django_htmx/htmx-2.min.js" in html
    assert "Quality against decode speed" in html  # the scatter of the view
    assert response.headers["Vary"].count("HX-Request") == 1


def test_an_htmx_request_gets_only_the_results_partial_and_a_clean_url(client: Client) -> None:
    response = client.get("/leaderboard/?scale=speed&gpu=&vendor=&sort=decode", headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and 'id="board-filters"' not in html
    assert html.lstrip().startswith('<section id="results"')
    assert "+ draft" in html  # speed stacks from leaderboard-v1.json, draft models included
    assert 'id="filter-state" hx-swap-oob="true"' in html  # keeps the form's sort in step
    # The form sends empty fields; the address bar gets the canonical link without them.
    assert response.headers["HX-Push-Url"] == "/leaderboard/?scale=speed&sort=decode"


def test_sorting_by_decode_speed_orders_the_rows_and_flips_on_a_second_click(
    client: Client,
) -> None:
    html = client.get("/leaderboard/?sort=decode", headers=HTMX).content.decode()
    cells = re.findall(
        r'<td class="num col-decode"><span class="[^"]*fig">([\d.,]+)</span>'
        r'<span class="ci( small-n)?">',
        html,
    )
    assert len(cells) >= 5  # the default class's rows in the small demo seed
    # Rows of three runs or more first, then those of one or two; each tier fastest first.
    tiers = [bool(few) for _speed, few in cells]
    assert tiers == sorted(tiers)
    for tier in (False, True):
        speeds = [float(v.replace(",", "")) for v, few in cells if bool(few) == tier]
        assert speeds == sorted(speeds, reverse=True)
    assert 'aria-sort="descending"' in html
    assert 'href="/leaderboard/?sort=decode&amp;dir=asc"' in html
    ascending = client.get("/leaderboard/?sort=decode&dir=asc", headers=HTMX).content.decode()
    assert 'aria-sort="ascending"' in ascending


def test_pages_keep_the_filters_in_their_links(client: Client) -> None:
    html = client.get("/leaderboard/?fits=96&sort=ttft").content.decode()
    assert "Next →" in html
    assert 'href="/leaderboard/?fits=96&amp;sort=ttft&amp;page=2"' in html
    assert 'href="/leaderboard/export.csv?fits=96&amp;sort=ttft"' in html
    # The default view's exports name the class it showed, so they keep showing it.
    default = client.get("/leaderboard/?engine=ollama").content.decode()
    slug = re.search(
        r'<td class="col-hardware"><a href="/leaderboard/\?hw=([a-z0-9.-]+)"', default
    )[1]
    assert f'href="/leaderboard/export.csv?hw={slug}&amp;engine=ollama"' in default


def test_pages_send_a_strict_content_security_policy_and_no_inline_code(client: Client) -> None:
    response = client.get("/leaderboard/")
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    html = response.content.decode()
    assert " style=" not in html
    assert re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html) is None
