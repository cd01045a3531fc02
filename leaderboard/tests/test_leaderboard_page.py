"""The leaderboard page: lane rows, filters, sorting, paging, partials, query counts, security.

Rows are lanes (a stack on one hardware class); without a hardware choice the board shows the
class with the most runs. The hardware-first views themselves are in test_hardware_first.py.
"""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils.html import escape

from leaderboard import cache as board_cache
from leaderboard import estimated
from leaderboard.tests.factories import HOSTILE, add_runs, ensure_lanes, record
from runs.models import Lane, Stack

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def _rows(html: str) -> list[str]:
    """Model ids of the table rows, in order."""
    return re.findall(r'<a class="model-id" href="/stacks/\d+/[^"]*">([^<]*)</a>', html)


def test_a_form_submitted_without_javascript_is_redirected_to_the_clean_link(
    client: Client,
) -> None:
    response = client.get("/leaderboard/?q=&vendor=nvidia&gpu=&engine=llama.cpp&scale=v3")
    assert response.status_code == 302
    assert response.url == "/leaderboard/?vendor=nvidia&engine=llama.cpp"


def test_hardware_and_stack_filters_pick_the_lanes_on_that_hardware(client: Client) -> None:
    add_runs(
        record(model_id="alpha:8b", gpu="NVIDIA GeForce RTX 4090", overall=80, decode=90),
        record(model_id="alpha:8b", gpu="NVIDIA GeForce RTX 3060", vram_gb=12, overall=70),
        record(model_id="beta:8b", gpu="NVIDIA GeForce RTX 3060", vram_gb=12, overall=65),
        record(model_id="gamma:8b", gpu="Apple M2 Max", vram_gb=None, ram_gb=96, overall=75),
        record(model_id="delta:8b", gpu="", vram_gb=None, overall=40),
        record(model_id="eps:8b", engine="vllm", overall=77, remote=True),
    )
    html = client.get("/leaderboard/?vram=12").content.decode()
    assert _rows(html) == ["alpha:8b", "beta:8b"]
    assert ">70.0<" in html and ">80.0<" not in html  # alpha's lane on the 12 GB card
    assert _rows(client.get("/leaderboard/?apple=1").content.decode()) == ["gamma:8b"]
    assert _rows(client.get("/leaderboard/?cpu=1").content.decode()) == ["delta:8b"]
    remote = client.get("/leaderboard/?hw=remote-endpoint&location=remote").content.decode()
    assert _rows(remote) == ["eps:8b"]
    # Without a hardware choice the default class (the RTX 3060, with the most runs) is shown.
    assert _rows(client.get("/leaderboard/?engine=vllm").content.decode()) == []
    assert _rows(client.get("/leaderboard/?hw=rtx-4090-24gb").content.decode()) == ["alpha:8b"]
    three = client.get("/leaderboard/?vendor=nvidia&vram=12&q=beta").content.decode()
    assert _rows(three) == ["beta:8b"]
    assert _rows(client.get("/leaderboard/?gpu=RTX+3060&sort=model&dir=desc").content.decode()) == [
        "beta:8b",
        "alpha:8b",
    ]


def test_comparable_verified_and_date_filters(client: Client) -> None:
    add_runs(
        record(model_id="old:8b", days_ago=200), record(model_id="partial:8b", comparable=False)
    )
    add_runs(record(model_id="checked:8b"), verified=True)
    assert sorted(_rows(client.get("/leaderboard/").content.decode())) == ["checked:8b", "old:8b"]
    everything = client.get("/leaderboard/?comparable=all").content.decode()
    assert "partial:8b" in _rows(everything) and "not comparable" in everything
    assert _rows(client.get("/leaderboard/?verified=1").content.decode()) == ["checked:8b"]
    assert "old:8b" not in _rows(client.get("/leaderboard/?days=30").content.decode())


def test_rows_show_the_median_with_its_interval_or_their_run_count(client: Client) -> None:
    add_runs(
        *(
            record(model_id="steady:8b", overall=o, decode=d)
            for o, d in ((50, 40), (60, 50), (90, 90))
        )
    )
    add_runs(*(record(model_id="pair:8b", overall=o, decode=d) for o, d in ((70, 30), (75, 35))))
    html = client.get("/leaderboard/").content.decode()
    steady, pair = (
        html.split(f">{name}</a>")[1].split("</tr>")[0] for name in ("steady:8b", "pair:8b")
    )
    # Three runs: the median decode 50 with the sign-test interval, which for n = 3 is min–max.
    interval = '<span class="ci">40.0–90.0</span>'
    assert f'<span class="strong fig">50.0</span>{interval}' in steady
    # Overall: the median 60 ranks the row; the best run's 90 is evidence under it.
    assert '<span class="strong fig">60.0</span>' in steady and "best 90.0 of 3" in steady
    # Two runs: their median, marked with the run count, no interval; ranked after steady
    # although its overall median (72.5) is higher.
    assert '<span class="strong fig">32.5</span><span class="ci small-n">2 runs</span>' in pair
    assert html.index(">steady:8b</a>") < html.index(">pair:8b</a>")
    assert "n too small" not in html


def test_legacy_rows_are_on_their_own_scale(client: Client, fixtures_dir) -> None:
    call_command("import_results", str(fixtures_dir / "leaderboard.json"), stdout=io.StringIO())
    call_command(
        "import_results",
        str(fixtures_dir / "generated/v3-smoke-local-run.json"),
        stdout=io.StringIO(),
    )
    ensure_lanes()
    ranked = client.get("/leaderboard/").content.decode()
    legacy = client.get("/leaderboard/?scale=v2").content.decode()
    assert "qwen2.5:1.5b" not in ranked
    assert "example-model:8b" in ranked
    assert "qwen2.5:1.5b" in legacy and "example-model:8b" not in legacy
    assert "never ranked against v3 scores" in legacy
    assert "legacy v2</span>" in legacy
    assert "benchmark 3.0.0" in ranked


# Each board view and the queries it makes. All three are asked of one seeded dataset (seeding
# 2,060 runs was most of the test's time, three times over).
QUERY_COUNTS = [
    # the runs per class and scale (which scale opens the site, its default class, the
    # hardware menu), the measurement methods and benchmark versions in view, and the boards'
    # fingerprint (what the estimates are kept by), all four read from the class boards; the
    # default class, narrow lanes, the page's lanes, which rows have a harness matrix; two
    # facets; and the single class's estimates (leaderboard.estimated: the class's machine,
    # the moderators' hardware additions, whether the lab measures the class; the
    # calibration and the estimates are kept by them and the boards, warm here)
    # (htmx asks for the results alone: without the form's facets and hardware classes)
    ("", 13, 11),
    # the classes replace the default; the rows on each scale there pick its scale (the
    # hardware menu's runs per class are summed apart from its classes)
    ("?vendor=nvidia&engine=llama.cpp", 11, 8),
    # runs instead of lanes: how many (capped), the runs, their stacks, classes, best runs,
    # attempts, submitters and the matrix links; and the estimates, as above
    ("?days=30", 18, 16),
]


def test_the_query_count_does_not_grow_with_rows(client: Client, django_assert_num_queries) -> None:
    def counts() -> None:
        # The estimates' calibration is kept by the lanes it reads, whatever the page version,
        # and computed by a worker when they change (leaderboard.tasks, as here); the class's
        # estimates are then kept by the same from the first board on (four queries).
        estimated.calibrate_now()
        client.get("/leaderboard/")
        for query, count, partial in QUERY_COUNTS:
            # A new cache version before each request, so every one computes its page.
            board_cache.bump()
            with django_assert_num_queries(count, info=query or "the default board"):
                client.get(f"/leaderboard/{query}")
            # Until something is published, repeats are answered from the cache.
            with django_assert_num_queries(0, info=query):
                client.get(f"/leaderboard/{query}")
                client.get(f"/leaderboard/{query}", headers=HTMX)
            board_cache.bump()
            with django_assert_num_queries(partial, info=query):
                client.get(f"/leaderboard/{query}", headers=HTMX)

    call_command("seed_demo", "--runs", "60", stdout=io.StringIO())
    ensure_lanes()
    counts()
    call_command("seed_demo", "--runs", "2000", stdout=io.StringIO())
    ensure_lanes()
    assert Stack.objects.filter(best_run__isnull=False).count() >= 50
    assert Lane.objects.filter(hardware_class__isnull=False).count() >= 300
    counts()


def test_hostile_names_are_escaped_in_the_table_filters_and_scatter(client: Client) -> None:
    add_runs(record(model_id=HOSTILE, gpu=f"NVIDIA {HOSTILE}", engine=HOSTILE))
    for path in ("/leaderboard/", f"/leaderboard/?engine={HOSTILE}", f"/leaderboard/?q={HOSTILE}"):
        html = client.get(path).content.decode()
        assert "<script>alert(1)</script>" not in html
        assert '"onmouseover=' not in html
        assert escape(HOSTILE) in html
    scatter = client.get("/leaderboard/").content.decode().split('class="chart-svg scatter"')[1]
    assert f"<title>Pareto front: {escape(HOSTILE)}" in scatter
