"""Issue 15, Must show 2: no public surface pools speed across hardware classes.

The walk plants runs whose speeds say which hardware class they were measured on: every decode,
prefill and TTFT figure of a class lies in a narrow band of its own (decode 1,100,000–1,100,070
on the RTX 4090, 1,300,000–1,300,070 on the H100, ...), far from every other number a page
shows. Any figure computed from one class's runs (a run's own, a median, an interval, a mean,
a box) stays inside that class's band; a figure that pools classes falls between bands, by the
choice of run counts (the canary test below checks that every pooling a page could do, across
all of a stack's classes, across both stacks, NVIDIA only or Apple plus CPU, lands between
bands). The walk then fetches every public page, chart, export, feed, share image (the text its
card draws) and API answer, and fails on any speed figure that lies in no band.

The leaderboard, landing page, exports, feeds and board API are built by the board's part of
issue 15; they are walked here too. The labelled all-hardware view must show no speed at all.
"""

from __future__ import annotations

import re
import statistics
from itertools import chain
from urllib.parse import urlsplit

import pytest
from django.db.models import Avg
from django.test import Client, RequestFactory
from django.urls import resolve

from leaderboard.tests.lane_factories import hw_class, on_class, speed_record
from leaderboard.views import images
from runs.importers.records import ImportedSuite
from runs.models import Run, SuiteResult
from submissions.tests.surfaces import assert_renders, public_urls
from worker.rules.scoring import SPEED_SUITES
from worker.rules.stats import median_interval

pytestmark = pytest.mark.django_db

# Decode base per class; prefill is 2,000,000 higher and TTFT (ms) 4,000,000 higher, so the
# three metrics never share a band either.
BASES = {"rtx-4090": 1_100_000, "h100": 1_300_000, "m3-max-64": 1_500_000, "cpu-epyc": 1_700_000}
METRICS = {"decode": 0, "prefill": 2_000_000, "ttft": 4_000_000}
RESERVED = (1_000_000, 6_000_000)  # every planted speed lies here, nothing else on a page does
STACK_OFFSET = {"raw": 0, "lm-eval": 50}
STEPS = (0, 7, 14)  # three runs per stack and class: medians need three
MARGIN = 3  # a run's trials spread ±2; rounding to a whole number moves 0.5
NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w]|[.,]\d)")
ALL_HARDWARE_VIEW = "/leaderboard/?hw=all"  # the board's labelled all-hardware view


def _value(slug: str, metric: str, harness: str, step: int) -> float:
    return BASES[slug] + METRICS[metric] + STACK_OFFSET[harness] + step


def _plant() -> dict:
    """Two stacks that share a label but for their harness, three runs each on four classes."""
    runs: dict[tuple[str, str], list[Run]] = {}
    for harness in STACK_OFFSET:
        for slug in BASES:
            versions = ("b1", "b1", "b2") if slug in ("rtx-4090", "h100") else ("b1",) * 3
            records = [
                speed_record(
                    slug,
                    model_id="walk-probe",
                    harness=harness,
                    engine_version=version,
                    submitter=("ada", "grace")[step % 2],
                    **{m: _value(slug, m, harness, step) for m in METRICS},
                )
                for step, version in zip(STEPS, versions, strict=True)
            ]
            runs[(harness, slug)] = on_class(slug, *records)
    return runs


def bands() -> list[tuple[float, float]]:
    return [
        (_value(slug, metric, "raw", 0) - MARGIN, _value(slug, metric, "lm-eval", 14) + MARGIN)
        for slug in BASES
        for metric in METRICS
    ]


def in_a_band(value: float) -> bool:
    return any(low <= value <= high for low, high in bands())


def speed_figures(text: str) -> list[float]:
    """Every number in the text that can only be a planted speed (thousands separators too)."""
    found = []
    for whole, fraction in NUMBER.findall(text):
        value = float(whole.replace(",", "") + (fraction or ""))
        if RESERVED[0] <= value < RESERVED[1]:
            found.append(value)
    return found


def body_text(url: str, response) -> str:
    """What a response shows: its text, or for a share image the text its card draws."""
    if response["Content-Type"].startswith("image/png"):
        match = resolve(urlsplit(url).path)
        card = images.CARDS[match.url_name](RequestFactory().get(url), **match.kwargs)
        return card.text()
    return response.content.decode()


def pooled(keys) -> list[float]:
    """Every aggregate a page might draw from the runs of several classes pooled together."""
    out = []
    for metric in METRICS:
        values = [_value(s, metric, h, step) for h, s in keys for step in STEPS]
        out += [statistics.median(values), statistics.fmean(values)]
        out.append(median_interval(values)["median"])
    return out


def test_the_check_catches_any_pooling_of_hardware_classes() -> None:
    """The canary: a page that pooled any of these would show a figure in no band."""
    everything = [(h, s) for h in STACK_OFFSET for s in BASES]
    poolings = [
        [("raw", s) for s in BASES],  # one stack, every class (the old stack page)
        everything,  # every stack of the model, every class (a model page, the site)
        [(h, s) for h in STACK_OFFSET for s in ("rtx-4090", "h100")],  # NVIDIA only
        [("raw", s) for s in ("rtx-4090", "h100")],
        [("raw", s) for s in ("m3-max-64", "cpu-epyc")],  # Apple plus CPU only
    ]
    for keys in poolings:
        for value in pooled(keys):
            assert not in_a_band(value), (keys, value)
    # And the checker finds a pooled median written the way pages write numbers.
    pooled_decode = statistics.median(_value(s, "decode", "raw", t) for s in BASES for t in STEPS)
    page = f"<td>{pooled_decode:,.1f}</td> median {pooled_decode:.2f}"
    assert [v for v in speed_figures(page) if not in_a_band(v)] == [pooled_decode] * 2
    # While a class's own median (and a single run) passes.
    own = statistics.median(_value("h100", "decode", "raw", t) for t in STEPS)
    assert all(in_a_band(v) for v in speed_figures(f"{own:,.1f} tok/s, run 1,300,007.0"))


def _urls(runs: dict) -> list[str]:
    first = {slug: runs[("raw", slug)][0] for slug in BASES}
    s1, s2 = runs[("raw", "h100")][0].stack_id, runs[("lm-eval", "h100")][0].stack_id
    urls = []
    for run in first.values():
        urls += public_urls(Run.objects.select_related("stack", "submission").get(id=run.id))
    for slug in BASES:
        urls += [
            f"/stacks/{s1}/?hw={slug}",
            f"/stacks/{s1}/share.png?hw={slug}",
            f"/compare/?stacks={s1},{s2}&hw={slug}",
            f"/compare/share.png?stacks={s1},{s2}&hw={slug}",
            f"/models/walk-probe/?hw={slug}",
            f"/leaderboard/?hw={slug}",
            f"/api/v1/leaderboard?hw={slug}",
            f"/leaderboard/export.md?hw={slug}",
        ]
    urls += [
        f"/stacks/{s1}/?vendor=nvidia",  # the filter keeps two classes: still one lane each
        f"/stacks/{s1}/?apple=1&cpu=1",
        f"/stacks/{s1}/?profile=core&days=30",
        f"/compare/?stacks={s1},{s2}",
        f"/compare/share.png?stacks={s1},{s2}",
        f"/compare/?stacks={s1},{s2}&vendor=nvidia",
        "/models/walk-probe/",
        f"/api/v1/stacks/{s2}",
        "/leaderboard/?vendor=nvidia",
        "/leaderboard/?apple=1&cpu=1",
        "/leaderboard/?mode=median",
        "/leaderboard/export.csv",
        "/leaderboard/export.json",
        "/leaderboard/export.md",
        "/leaderboard/feed.atom",
        ALL_HARDWARE_VIEW,
    ]
    return list(dict.fromkeys(urls))


def test_no_public_surface_pools_speed_across_hardware_classes(client: Client) -> None:
    runs = _plant()
    seen: dict[str, list[float]] = {}
    for url in _urls(runs):
        assert_renders(client, url)
        response = client.get(url)
        seen[url] = speed_figures(body_text(url, response))
    pooled_figures = {
        url: sorted({v for v in values if not in_a_band(v)}) for url, values in seen.items()
    }
    assert {url: v for url, v in pooled_figures.items() if v} == {}
    # Not vacuous: the detail pages, images and API show the planted speeds.
    s1 = runs[("raw", "h100")][0].stack_id
    for url in (
        f"/stacks/{s1}/",
        f"/stacks/{s1}/share.png",
        f"/stacks/{s1}/?vendor=nvidia",
        f"/compare/share.png?stacks={s1},{runs[('lm-eval', 'h100')][0].stack_id}",
        "/models/walk-probe/",
        f"/runs/{runs[('raw', 'cpu-epyc')][0].id}/",
        f"/api/v1/stacks/{s1}",
    ):
        assert len(seen[url]) >= 3, url
    # Every class's lane is on the stack page, each with its own median.
    html = client.get(f"/stacks/{s1}/").content.decode()
    for slug in BASES:
        own = _value(slug, "decode", "raw", STEPS[1])
        assert f"{own:,.1f}" in html, slug
        assert hw_class(slug).label in html


def test_the_all_hardware_view_is_labelled_and_shows_no_speed(client: Client) -> None:
    _plant()
    html = client.get(ALL_HARDWARE_VIEW).content.decode()
    assert "All hardware: these rows mix machines." in html
    assert speed_figures(html) == []


def test_walk_has_several_classes_and_both_stacks_everywhere(client: Client) -> None:
    runs = _plant()
    assert Run.objects.published().values("hardware_class").distinct().count() == len(BASES)
    assert len({run.stack_id for run in chain.from_iterable(runs.values())}) == 2


# --- grouped views (issue 29): several classes in one view, each ranked among itself ----------


def ranked_across_classes(rows: list[tuple[str, int]]) -> list[str]:
    """What is wrong with a grouped view's (class, rank) rows: a class whose rows are not
    together, or whose ranks do not run 1, 2, 3… (a rank taken from another class's rows)."""
    problems, seen, previous = [], {}, None
    for label, rank in rows:
        if label != previous and label in seen:
            problems.append(f"{label}'s rows are split by another class's")
        expected = seen.get(label, 0) + 1
        if rank != expected:
            problems.append(f"{label} rank {rank} where {expected} was due")
        seen[label], previous = rank, label
    return problems


def test_the_check_catches_a_view_that_ranks_classes_against_each_other() -> None:
    # One ranking over both classes, fastest first, as the grouped views used to order them.
    assert ranked_across_classes([("H100 80 GB", 1), ("RTX 4090 24 GB", 2), ("H100 80 GB", 3)])
    assert ranked_across_classes([("H100 80 GB", 1), ("H100 80 GB", 2), ("RTX 4090 24 GB", 3)])
    assert not ranked_across_classes([("H100 80 GB", 1), ("H100 80 GB", 2), ("RTX 4090 24 GB", 1)])


def test_grouped_views_rank_each_class_among_itself(client: Client) -> None:
    for slug, decode in (("rtx-4090", 90.0), ("h100", 300.0)):
        for i, model in enumerate(("a:8b", "b:8b")):
            on_class(
                slug,
                speed_record(slug, model_id=model, decode=decode - i, prefill=1000, ttft=50),
            )
    grouped = "/leaderboard/?vendor=nvidia&sort=decode"
    html = client.get(grouped).content.decode()
    cells = re.findall(
        r'<td class="num rank">(\d+)</td>.*?<td class="col-hardware"><a [^>]*>([^<]+)</a>',
        html,
        re.S,
    )
    rows = [(label, int(rank)) for rank, label in cells]
    assert len(rows) == 4 and not ranked_across_classes(rows), rows
    assert html.count('class="class-section"') == 2
    assert "ranked class by class, never one class against another" in html
    data = client.get("/api/v1/leaderboard?vendor=nvidia&sort=decode").json()
    assert data["view"]["ranked_within"] == "hardware class" and not data["view"]["mixes_hardware"]
    api_rows = [(r["hardware_class"]["label"], r["rank"]) for r in data["results"]]
    assert not ranked_across_classes(api_rows), api_rows
    csv_rows = client.get("/leaderboard/export.csv?vendor=nvidia&sort=decode")
    lines = csv_rows.content.decode().splitlines()
    header = lines[0].split(",")
    ranked = [
        (line.split(",")[header.index("hardware")], int(line.split(",")[0])) for line in lines[1:]
    ]
    assert not ranked_across_classes(ranked), ranked


# --- per-suite tables (issue 29): a suite that scores speed belongs to one class -------------

# The speed suite's score of each class's runs; pooled, they would average 54.5.
SPEED_SUITE_SCORES = {"rtx-4090": 21.25, "h100": 87.75}
POOLED_SPEED_SUITE = 54.5


def per_suite_rows(html: str) -> list[tuple[str, str]]:
    """(suite, the rest of its row) for each row of a page's "Per-suite scores" table."""
    if "Per-suite scores" not in html:
        return []
    table = html.split("Per-suite scores", 1)[1].split("</table>", 1)[0]
    return re.findall(r'<tr><th scope="row">([^<]+)</th>(.*?)</tr>', table, re.S)


def speed_in_suite_table(html: str) -> list[str]:
    """What is wrong with a page's per-suite table: a suite that scores speed, or the speed
    suite's score pooled over classes, shown in it."""
    problems = []
    for suite, cells in per_suite_rows(html):
        if suite.strip() in SPEED_SUITES:
            problems.append(f"{suite.strip()} row")
        if f"{POOLED_SPEED_SUITE:.1f}" in cells:
            problems.append(f"{suite.strip()} shows the pooled speed score")
    return problems


def _plant_speed_suites() -> list[int]:
    """Two stacks, each with three runs on each of two classes, every run scoring the speed
    suite at its class's value."""
    stacks = []
    for harness in STACK_OFFSET:
        for slug, score in SPEED_SUITE_SCORES.items():
            records = []
            for step in STEPS:
                made = speed_record(
                    slug,
                    model_id="suite-probe",
                    harness=harness,
                    decode=90 + step,
                    prefill=900,
                    ttft=40,
                )
                made.suites.append(
                    ImportedSuite(suite="speed", score=score, task_count=9, pass_count=9)
                )
                records.append(made)
            stacks.append(on_class(slug, *records)[0].stack_id)
    return sorted(set(stacks))


def test_the_check_catches_a_per_suite_table_that_averages_speed() -> None:
    old = (
        "<h2>Per-suite scores</h2><table><tbody>"
        '<tr><th scope="row">speed</th><td class="num">54.5</td></tr>'
        '<tr><th scope="row">toolcall</th><td class="num">55.0</td></tr></tbody></table>'
    )
    assert speed_in_suite_table(old) == ["speed row", "speed shows the pooled speed score"]
    assert speed_in_suite_table(old.replace("speed</th>", "reasoning</th>")) == [
        "reasoning shows the pooled speed score"
    ]


def test_per_suite_tables_never_average_speed_across_classes(client: Client) -> None:
    s1, s2 = _plant_speed_suites()
    # The planted data would pool: every speed suite score of the stack, over both classes.
    pooled = SuiteResult.objects.filter(run__stack_id=s1, suite="speed").aggregate(m=Avg("score"))
    assert pooled["m"] == pytest.approx(POOLED_SPEED_SUITE)
    for url in (
        f"/stacks/{s1}/",
        f"/stacks/{s1}/?hw=h100",
        f"/compare/?stacks={s1},{s2}",
        f"/compare/?stacks={s1},{s2}&hw=rtx-4090",
    ):
        html = client.get(url).content.decode()
        assert per_suite_rows(html), url  # not vacuous: the table is there, with quality suites
        assert speed_in_suite_table(html) == [], url
