"""The hardware-first board: rows are lanes (a stack on one hardware class), the visitor's
hardware is in the URL, and speed is never pooled across classes (issue 15)."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.test import Client

from leaderboard import cache as board_cache
from leaderboard.tests.factories import add_runs, hardware_class, lane, record
from runs.models import Lane, Run, Stack
from runs.services import refresh_stack_stats

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}
GPUS = {
    "4090": {"gpu": "NVIDIA GeForce RTX 4090", "vram_gb": 24},
    "3090": {"gpu": "NVIDIA GeForce RTX 3090", "vram_gb": 24},
    "3060": {"gpu": "NVIDIA GeForce RTX 3060", "vram_gb": 12},
    "h100": {"gpu": "NVIDIA H100 80GB HBM3", "vram_gb": 80},
    "m2": {"gpu": "Apple M2 Max", "vram_gb": None, "ram_gb": 96, "cpu": "Apple M2 Max"},
    "cpu": {"gpu": "", "vram_gb": None, "cpu": "AMD EPYC 7443P", "ram_gb": 256},
}


def _runs(model: str, where: str, decodes: list[float], qualities: list[float] | None = None):
    qualities = qualities or [60.0] * len(decodes)
    return [
        record(model_id=model, decode=d, quality=q, overall=q + 5, **GPUS[where])
        for d, q in zip(decodes, qualities, strict=True)
    ]


@pytest.fixture
def machines() -> None:
    """alpha on six classes, beta on the RTX 4090 only; the 4090 has the most runs."""
    add_runs(
        *_runs("alpha:8b", "4090", [100, 110, 120], [60, 62, 64]),
        *_runs("beta:8b", "4090", [200, 210], [50, 52]),
        *_runs("alpha:8b", "3090", [80, 85, 90], [61, 63, 65]),
        *_runs("alpha:8b", "3060", [40], [59]),
        *_runs("alpha:8b", "h100", [500, 520], [66, 67]),
        *_runs("alpha:8b", "m2", [30], [58]),
        *_runs("alpha:8b", "cpu", [6], [57]),
    )


def _table(html: str) -> list[dict]:
    """Each table row: model, hardware label and the decode cell's text."""
    rows = []
    for tr in re.findall(r"<tr>\s*<td class=\"pick\">(.*?)</tr>", html, re.S):
        model = re.search(r'class="model-id"[^>]*>([^<]*)<', tr)[1]
        hardware = re.search(r'<td class="col-hardware"><a [^>]*>([^<]*)</a>', tr)
        decode = re.search(r'<td class="num col-decode">(.*?)</td>', tr, re.S)
        rows.append(
            {
                "model": model,
                "hardware": hardware[1] if hardware else None,
                "decode": re.sub(r"<[^>]+>", " ", decode[1]).split() if decode else None,
            }
        )
    return rows


def test_the_default_view_is_the_class_with_the_most_runs(client: Client, machines) -> None:
    html = client.get("/leaderboard/").content.decode()
    assert "On RTX 4090 24 GB" in html and "The hardware with the most runs" in html
    rows = _table(html)
    assert [r["model"] for r in rows] == ["alpha:8b", "beta:8b"]  # overall 69 against 57
    assert {r["hardware"] for r in rows} == {"RTX 4090 24 GB"}
    # alpha's three 4090 runs: median 110 with its interval; beta's two: their median, no
    # interval, ranked after alpha.
    assert rows[0]["decode"] == ["110.0", "100.0–120.0"]
    assert rows[1]["decode"] == ["205.0", "2", "runs"]
    assert "n too small" not in html
    assert 'class="chart-svg scatter"' in html  # one class: the chart is drawn
    # The "your hardware" menu names the default class without choosing it for the visitor
    # (issue 29), and offers the rest.
    assert '<option value="" selected>Pick yours (now RTX 4090 24 GB, the most runs)<' in html
    assert '<option value="rtx-4090-24gb">' in html
    for value in ('value="h100-80gb"', 'value="vram:24"', 'value="fits:24"', 'value="all"'):
        assert value in html


def test_picking_a_class_shows_only_that_class_speeds(client: Client, machines) -> None:
    html = client.get("/leaderboard/?hw=h100-80gb").content.decode()
    rows = _table(html)
    assert [(r["model"], r["hardware"]) for r in rows] == [("alpha:8b", "H100 80 GB")]
    assert rows[0]["decode"][1:] == ["2", "runs"]
    for other in ("110.0", "85.0", "210.0", "RTX 4090 24 GB</a>"):
        assert other not in html.split('id="results"')[1]
    assert "Every speed on this page was measured on H100 80 GB" in html
    htmx = client.get("/leaderboard/?hw=h100-80gb&sort=decode", headers=HTMX)
    assert htmx.headers["HX-Push-Url"] == "/leaderboard/?hw=h100-80gb&sort=decode"
    assert _table(htmx.content.decode())[0]["hardware"] == "H100 80 GB"


def test_a_vram_size_ranks_lanes_on_the_gpus_of_that_size(client: Client, machines) -> None:
    html = client.get("/leaderboard/?vram=24").content.decode()
    rows = _table(html)
    assert sorted((r["model"], r["hardware"]) for r in rows) == [
        ("alpha:8b", "RTX 3090 24 GB"),
        ("alpha:8b", "RTX 4090 24 GB"),
        ("beta:8b", "RTX 4090 24 GB"),
    ]
    by_class = {r["hardware"]: r["decode"][0] for r in rows if r["model"] == "alpha:8b"}
    assert by_class == {"RTX 3090 24 GB": "85.0", "RTX 4090 24 GB": "110.0"}
    # Points from two machines would make a Pareto front across hardware: no chart.
    assert 'class="chart-svg scatter"' not in html
    assert "drawn for one hardware class at a time" in html


def test_what_fits_ranks_stacks_on_hardware_with_at_most_that_memory(
    client: Client, machines
) -> None:
    fits = _table(client.get("/leaderboard/?fits=24").content.decode())
    assert {r["hardware"] for r in fits} == {"RTX 4090 24 GB", "RTX 3090 24 GB", "RTX 3060 12 GB"}
    big = _table(client.get("/leaderboard/?fits=96").content.decode())
    assert "Apple M2 Max 96 GB" in {r["hardware"] for r in big}
    assert "H100 80 GB" in {r["hardware"] for r in big}
    assert not any(r["hardware"].startswith("CPU only") for r in big)
    cpu = _table(client.get("/leaderboard/?fits=256&cpu=1").content.decode())
    assert [r["hardware"] for r in cpu] == ["CPU only: AMD EPYC 7443P · 256 GB"]


def test_the_menu_values_become_their_own_parameters(client: Client, machines) -> None:
    for sent, clean in (
        ("hw=vram%3A24&q=", "/leaderboard/?vram=24"),
        ("hw=fits%3A16", "/leaderboard/?fits=16"),
        ("hw=kind%3Acpu&engine=", "/leaderboard/?cpu=1"),
        ("hw=rtx-4090-24gb&vram=12&engine=", "/leaderboard/?hw=rtx-4090-24gb"),
    ):
        response = client.get(f"/leaderboard/?{sent}")
        assert response.status_code == 302 and response.url == clean, sent
    assert "No hardware class matches" in client.get("/leaderboard/?hw=nope").content.decode()
    hostile = client.get("/leaderboard/?hw=%3Cscript%3E").content.decode()
    assert "<script>" not in hostile.split('id="results"')[1] and "On RTX 4090 24 GB" in hostile


def test_all_hardware_says_it_mixes_machines_and_ranks_by_quality_alone(
    client: Client, machines
) -> None:
    html = client.get("/leaderboard/?hw=all&sort=decode").content.decode()
    results = html.split('id="results"')[1]
    assert "All hardware: these rows mix machines." in results
    for speed in ("Decode tok/s", "Prefill", "TTFT", "col-decode", "Overall", "scatter"):
        assert speed not in results, speed
    assert 'aria-sort="descending"' in results and ">Quality<" in results  # sort=decode ignored
    # alpha pooled over its 11 runs on six classes: quality median 62 with its interval.
    alpha = results.split(">alpha:8b</a>")[1].split("</tr>")[0]
    assert '<span class="strong fig">62.0</span>' in alpha and ">11<" in alpha

    rows = list(
        csv.DictReader(io.StringIO(client.get("/leaderboard/export.csv?hw=all").content.decode()))
    )
    assert [r["model"] for r in rows] == ["alpha:8b", "beta:8b"]
    assert {r["hardware"] for r in rows} == {"all hardware (mixes machines)"}
    assert not any(
        "decode" in k or "ttft" in k or "prefill" in k or "overall" in k for k in rows[0]
    )
    data = json.loads(client.get("/leaderboard/export.json?hw=all").content)
    assert data["view"]["mixes_hardware"] and "different machines" in data["view"]["warning"]
    assert not any("decode" in key for key in data["rows"][0])
    markdown = client.get("/leaderboard/export.md?hw=all").content.decode()
    assert "ALL HARDWARE" in markdown and "Decode" not in markdown
    feed = client.get("/leaderboard/feed.atom?hw=all").content.decode()
    assert "tok/s" not in feed and "quality" in feed
    assert "tok/s decode on RTX 4090 24 GB" in client.get("/leaderboard/feed.atom").content.decode()


def test_speed_only_runs_have_their_own_list_per_class(client: Client, machines) -> None:
    add_runs(
        record(model_id="fast:1b", score_scale="speed", decode=300, **GPUS["4090"]),
        record(model_id="fast:1b", score_scale="speed", decode=150, **GPUS["3060"]),
    )
    html = client.get("/leaderboard/?scale=speed&hw=rtx-4090-24gb").content.decode()
    results = html.split('id="results"')[1]
    assert [(r["model"], r["decode"][0]) for r in _table(html)] == [("fast:1b", "300.0")]
    assert "Overall" not in results and ">Quality<" not in results and "no quality" in results
    assert "alpha:8b" not in results  # v3 runs are never on the speed-only list
    pooled = client.get("/leaderboard/?scale=speed&hw=all").content.decode()
    assert _table(pooled) == [] and "Pick your hardware to see them" in pooled


def test_benchmark_versions_are_never_ranked_together(client: Client) -> None:
    add_runs(
        *(record(model_id="old:8b", benchmark_version="3.1.0", overall=90) for _ in range(2)),
        record(model_id="new:8b", benchmark_version="3.2.0", overall=50),
    )
    newest = client.get("/leaderboard/").content.decode()
    assert [r["model"] for r in _table(newest)] == ["new:8b"]
    assert "benchmark 3.2.0" in newest and 'href="/leaderboard/?bv=3.1.0"' in newest
    older = client.get("/leaderboard/?bv=3.1.0").content.decode()
    assert [r["model"] for r in _table(older)] == ["old:8b"]
    assert [r["model"] for r in _table(client.get("/leaderboard/?hw=all").content.decode())] == [
        "new:8b"
    ]


def test_runs_that_name_no_benchmark_version_are_a_version_of_their_own(client: Client) -> None:
    add_runs(
        record(model_id="old:8b", benchmark_version="", overall=40),
        record(model_id="new:8b", benchmark_version="4.0.0", overall=50),
    )
    # One row each: the tie goes to the newer version.
    newest = client.get("/leaderboard/").content.decode()
    assert [r["model"] for r in _table(newest)] == ["new:8b"]
    assert "this view shows 4.0.0, the version with the most rows here. Other versions: <a" in (
        newest
    )
    assert 'href="/leaderboard/?bv=unversioned"' in newest
    unversioned = client.get("/leaderboard/?bv=unversioned").content.decode()
    assert [r["model"] for r in _table(unversioned)] == ["old:8b"]
    assert '<option value="unversioned" selected>' in unversioned


def test_speeds_of_one_method_share_a_board_across_benchmark_versions(client: Client) -> None:
    """A new benchmark version (new quality tasks) leaves the speed-only board whole while the
    speed method is the same; a new speed method is a version of its own (issue 29)."""
    add_runs(
        record(model_id="old:8b", score_scale="speed", benchmark_version="3.1.0", decode=40),
        record(model_id="new:8b", score_scale="speed", benchmark_version="4.0.0", decode=50),
    )
    board = client.get("/leaderboard/?scale=speed").content.decode()
    assert [r["model"] for r in _table(board)] == ["new:8b", "old:8b"]
    assert "speed method cli-0.3" in board and "Other versions" not in board
    Run.objects.filter(stack__model_id="new:8b").update(speed_version="2")
    refresh_stack_stats(stack_ids=list(Stack.objects.values_list("id", flat=True)))
    board_cache.bump()
    split = client.get("/leaderboard/?scale=speed").content.decode()
    assert [r["model"] for r in _table(split)] == ["new:8b"]  # the tie goes to the newer one
    assert "Only one speed method version" in split
    assert 'href="/leaderboard/?scale=speed&amp;bv=cli-0.3"' in split


def test_the_row_says_how_many_attempts_the_best_run_was_picked_from(client: Client) -> None:
    (run,) = add_runs(record(model_id="tries:8b", overall=80))
    Lane.objects.all().delete()
    lane(Stack.objects.get(), hardware_class(), best_run=run, attempt_count=6)
    html = client.get("/leaderboard/?hw=rtx-4090-24gb").content.decode()
    assert "best 80.0 of 6" in html and "n too small" not in html


def test_run_filters_compute_the_same_figures_as_the_stored_lanes(client: Client, machines) -> None:
    # Every run is recent, so "last year" picks all of them: the rows must not change.
    for view in ("", "?vram=24", "?hw=all"):
        sep = "&" if view else "?"
        stored = _table(client.get(f"/leaderboard/{view}").content.decode())
        computed = client.get(f"/leaderboard/{view}{sep}days=365").content.decode()
        assert "figures from the runs that match the filters" in computed
        assert _table(computed) == stored, view


def test_the_api_answers_the_same_hardware_choice(client: Client, machines) -> None:
    data = client.get("/api/v1/leaderboard?vram=24").json()
    assert data["view"]["hardware_class"] is None and not data["view"]["mixes_hardware"]
    assert {r["hardware_class"]["slug"] for r in data["results"]} == {
        "rtx-4090-24gb",
        "rtx-3090-24gb",
    }
    alpha = next(
        r
        for r in data["results"]
        if r["hardware_class"]["slug"] == "rtx-4090-24gb" and r["stack"]["model_id"] == "alpha:8b"
    )
    assert alpha["decode_tps"] == {"value": 110.0, "n": 3, "ci95": [100.0, 120.0]}


def test_the_landing_page_starts_with_your_hardware(client: Client, machines) -> None:
    html = client.get("/").content.decode()
    assert 'action="/leaderboard/"' in html and '<select id="landing-hw" name="hw"' in html
    assert '<option value="rtx-4090-24gb">' in html  # offered, not chosen (issue 29)
    assert 'href="/leaderboard/?hw=h100-80gb"' in html  # a popular class, one click away
    top = html.split('id="top-title"')[1]
    assert "Top stacks on RTX 4090 24 GB" in top
    quality = top.split("Best quality on any hardware")[1].split("</section>")[0]
    assert "alpha:8b" in quality and "tok/s" not in quality


def test_a_run_filter_that_matches_too_many_runs_asks_for_a_narrower_view(
    client: Client, machines, monkeypatch
) -> None:
    from leaderboard import queries

    monkeypatch.setattr(queries, "RUN_FILTER_LIMIT", 3)
    wide = client.get("/leaderboard/?hw=rtx-4090-24gb&days=365").content.decode()
    assert _table(wide) == [] and "too many to rank from the runs themselves" in wide
    assert client.get("/api/v1/leaderboard?hw=rtx-4090-24gb&days=365").json()["view"][
        "too_many_runs"
    ]
    narrow = _table(client.get("/leaderboard/?hw=h100-80gb&days=365").content.decode())
    assert [r["model"] for r in narrow] == ["alpha:8b"]
    # The stored lanes are not limited: the same class without the run filter has its rows.
    assert len(_table(client.get("/leaderboard/?hw=rtx-4090-24gb").content.decode())) == 2


def test_a_chip_without_its_memory_size_names_every_size_of_it(client: Client, machines) -> None:
    add_runs(*_runs("alpha:8b", "m2", [31], [58]), record(model_id="big:8b", decode=33,
             **{**GPUS["m2"], "ram_gb": 64}))  # fmt: skip
    one = client.get("/leaderboard/?hw=rtx-4090").content.decode()
    assert {r["hardware"] for r in _table(one)} == {"RTX 4090 24 GB"}
    sizes = client.get("/leaderboard/?hw=apple-m2-max").content.decode()
    assert {r["hardware"] for r in _table(sizes)} == {"Apple M2 Max 64 GB", "Apple M2 Max 96 GB"}
    assert "unknown hardware" in client.get("/leaderboard/?hw=rtx-40").content.decode()
