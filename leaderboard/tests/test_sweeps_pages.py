"""Speed at depth and under concurrency on the stack and run pages: medians of the runs' own
figures per hardware class with n and their 95% interval (never pooled across classes),
skipped and failed cells with their reason, "not measured" without sweeps, and stored values
of the wrong type dropped and escaped rather than breaking the page."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from leaderboard import charts
from leaderboard.tests.factories import HOSTILE
from leaderboard.tests.lane_factories import class_record, on_class
from leaderboard.tests.sweep_bundles import FAILED, SKIPPED, sweeps, valid
from runs.lane_rows import Interval

pytestmark = pytest.mark.django_db


def _run(slug: str, raw: dict | None = None, **fields):
    made = class_record(slug, **fields)
    if raw is not None:
        made.raw_payload = raw
    return made


def _stack() -> int:
    """Three RTX 4090 runs with sweeps, one without, one not comparable with wild figures, and
    one H100 run whose figures must stay on its own class."""
    runs = on_class(
        "rtx-4090",
        *(_run("rtx-4090", {"sweeps": valid(sweeps(d))}) for d in (50.0, 52.0, 54.0)),
        _run("rtx-4090"),
        _run("rtx-4090", {"sweeps": sweeps(9000.0)}, comparable=False),
    )
    on_class("h100", _run("h100", {"run": {"sweeps": valid(sweeps(300.0, slots=None))}}))
    return runs[0].stack_id


def _section(html: str) -> str:
    start = html.index('id="sweeps"')
    return html[start : html.index("</section>", start)]


def _table(section: str, kind: str, slug: str) -> str:
    match = re.search(
        rf'<table class="[^"]*{kind}-table" data-class="{slug}"[^>]*>.*?</table>', section, re.S
    )
    assert match, (kind, slug)
    return match.group(0)


def _caption(section: str, kind: str, place: int) -> str:
    """The caption of the place-th table of a kind (groups come most runs first)."""
    match = re.search(rf'<p class="sweep-caption" id="{kind}-{place}">.*?</p>', section, re.S)
    assert match, (kind, place)
    return re.sub(r"\s+", " ", match.group(0))


def _notes(section: str, table: str) -> str:
    """The list of cells not measured that follows a table."""
    after = section[section.index(table) + len(table) :]
    notes = after[: after.index("</ul>")]
    assert "<table" not in notes and '<ul class="sweep-notes"' in notes
    return notes


def _row(table: str, attribute: str, key: int) -> str:
    match = re.search(rf'<tr {attribute}="{key}">.*?</tr>', table, re.S)
    assert match, key
    return re.sub(r"\s+", " ", match.group(0))


def test_depth_figures_are_medians_over_the_classes_own_runs(client: Client) -> None:
    section = _section(client.get(f"/stacks/{_stack()}/").content.decode())
    rtx = _table(section, "depth", "rtx-4090")
    caption = _caption(section, "depth", 1)
    assert "RTX 4090 24 GB" in caption and "3 runs with the depth sweep" in caption
    assert "512 prompt and 128 output tokens" in caption
    # 52 is the median of 50, 52 and 54: the H100's 300 and the non-comparable 9000 stay out.
    zero = _row(rtx, "data-depth", 0)
    assert '<td class="num">3</td>' in zero
    assert '52.0</span> <span class="ci">95% CI 50.0–54.0' in zero
    assert "1,040" in zero  # prefill: 20 × decode
    assert "46.8</span>" in _row(rtx, "data-depth", 4096)  # 0.9 × 52
    assert ">16K<" in rtx and ">4K<" in rtx
    assert '<td class="num">0</td>' in _row(rtx, "data-depth", 32768)
    assert f"<strong>32K</strong>: skipped in 3 runs: {SKIPPED}" in _notes(section, rtx)
    h100 = _table(section, "depth", "h100")
    assert "H100 80 GB" in _caption(section, "depth", 2)
    assert "1 run with the depth sweep" in _caption(section, "depth", 2)
    assert "1 run" in _row(h100, "data-depth", 0) and "runs: 300.0" in h100
    assert "n too small" not in h100


def test_the_curves_draw_only_medians_of_three_runs_with_their_interval(client: Client) -> None:
    section = _section(client.get(f"/stacks/{_stack()}/").content.decode())
    decode = section.split('aria-labelledby="depth-decode-title')[1].split("</svg>")[0]
    assert "RTX 4090 24 GB: 0 52.0 (95% CI 50.0–54.0) over 3 runs; 4K 46.8" in decode
    assert "H100" not in decode  # one run: no interval, so no point and no line
    assert decode.count('class="pt"') == 3  # 0, 4K and 16K; 32K was skipped everywhere
    assert 'aria-labelledby="depth-prefill-title' in section
    assert 'aria-labelledby="streams-aggregate-title' in section


def test_the_concurrency_table_has_aggregate_per_stream_ttft_tail_and_slots(
    client: Client,
) -> None:
    section = _section(client.get(f"/stacks/{_stack()}/").content.decode())
    rtx = _table(section, "streams", "rtx-4090")
    two = _row(rtx, "data-streams", 2)
    assert "83.2</span>" in two  # aggregate: 2 streams × 0.8 × 52
    assert "41.6</span>" in two  # per stream: 0.8 × 52
    assert ">80</span>" in two and ">120</span>" in two and "(max)" in two
    assert "server slots: 4" in _caption(section, "streams", 1)
    assert f"<strong>8 streams</strong>: failed in 3 runs: {FAILED}" in _notes(section, rtx)
    h100 = _table(section, "streams", "h100")
    one = _row(h100, "data-streams", 1)
    assert '<td class="num">1</td>' in one and "1 run" in one and "runs: 240.0" in one
    assert "server slots: not reported" in _caption(section, "streams", 2)


def test_without_sweeps_both_pages_say_not_measured(client: Client) -> None:
    (run,) = on_class("rtx-4090", _run("rtx-4090", {"bundle_schema_version": "1.1"}))
    stack = _section(client.get(f"/stacks/{run.stack_id}/").content.decode())
    assert "Not measured: no approved run of this stack ran" in stack
    page = _section(client.get(f"/runs/{run.id}/").content.decode())
    assert "Not measured: this run did not include" in page


def test_the_run_page_shows_its_own_cells_with_n_and_reasons(client: Client) -> None:
    (run,) = on_class("rtx-4090", _run("rtx-4090", {"sweeps": valid(sweeps(50.0))}))
    section = _section(client.get(f"/runs/{run.id}/").content.decode())
    zero = _row(section, "data-depth", 0)
    assert '50.0</span> <span class="ci">75% CI 49.0–51.0 · n = 3' in zero
    assert "1,000</span>" in zero and ">0<" in zero
    assert "4,122" in _row(section, "data-depth", 4096)  # the server's count of tokens there
    assert f"skipped: {SKIPPED}" in _row(section, "data-depth", 32768)
    four = _row(section, "data-streams", 4)
    assert ">16</td>" in four and "160.0</span>" in four and "(max)" in four
    assert "n = 16" in four
    assert f"failed: {FAILED}" in _row(section, "data-streams", 8)
    assert "Server slots: 4" in section and "total_slots" in section
    assert "The server’s context: 8,192 tokens." in section


def test_an_ollama_run_says_where_its_depth_context_came_from(client: Client) -> None:
    block = sweeps(50.0)
    block["depth"].update(server_context=5120, context_source="ollama num_ctx (model context 8192)")
    (run,) = on_class("rtx-4090", _run("rtx-4090", {"sweeps": valid(block)}))
    section = _section(client.get(f"/runs/{run.id}/").content.decode())
    assert "The server’s context: 5,120 tokens (ollama num_ctx (model context 8192))." in section
    block["depth"]["context_source"] = HOSTILE
    (hostile,) = on_class("rtx-4090", _run("rtx-4090", {"sweeps": block}))
    section = _section(client.get(f"/runs/{hostile.id}/").content.decode())
    assert "<script>" not in section and "&lt;script&gt;" in section


def test_hostile_sweeps_are_dropped_or_escaped_and_never_break_a_page(client: Client) -> None:
    block = sweeps(50.0)
    cells = block["depth"]["cells"]
    cells[0]["decode_tps"] = {"n": "3", "median": "FAST-WORD", "ci95_low": [1], "ci95_high": {}}
    cells[1]["decode_tps"]["n"] = True
    cells[1]["prefill_tps"] = "LOTS-WORD"
    cells[2]["depth"] = -5
    cells[3]["reason"] = HOSTILE + "x" * 5000
    cells.extend({"depth": 100 + i, "status": "measured"} for i in range(10_000))
    cells.append({"depth": 7, "status": "<b>odd</b>", "reason": HOSTILE})
    streams = block["concurrency"]
    streams["server_slots"] = "<i>4</i>"
    streams["slots_source"] = HOSTILE
    streams["cells"][0].update(aggregate_tps="NaN", ttft_tail_label=HOSTILE, requests=1.5)
    streams["cells"][1]["streams"] = HOSTILE
    streams["cells"][3]["reason"] = {"html": HOSTILE}
    runs = on_class(
        "rtx-4090",
        *(_run("rtx-4090", {"sweeps": block}) for _ in range(3)),
        _run("rtx-4090", {"sweeps": {"depth": "deep", "concurrency": [1, 2]}}),
        _run("rtx-4090", {"sweeps": ["not", "an", "object"]}),
        _run("rtx-4090", {"run": "not a bundle", "sweeps": {"depth": {"cells": "none"}}}),
    )
    for path in (f"/stacks/{runs[0].stack_id}/", f"/runs/{runs[0].id}/", f"/runs/{runs[3].id}/"):
        response = client.get(path)
        assert response.status_code == 200, path
        html = response.content.decode()
        assert "<script>alert(1)" not in html and "<b>odd" not in html and "<i>4" not in html
        section = _section(html)
        assert "FAST-WORD" not in section and "LOTS-WORD" not in section
        assert "x" * 400 not in section
        assert section.count("<tr data-depth=") <= 16
    run_page = _section(client.get(f"/runs/{runs[0].id}/").content.decode())
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in run_page  # the reason, escaped and cut
    assert "Server slots: not reported" in run_page
    assert '<tr data-depth="7">' not in run_page  # an unknown status is not a cell
    stack = _section(client.get(f"/stacks/{runs[0].stack_id}/").content.decode())
    assert "skipped in 3 runs: &lt;script&gt;" in stack
    assert "HTTP 500" not in stack  # that cell's reason was an object, so it has none


def test_the_stack_pages_queries_do_not_grow_with_sweep_runs(
    client: Client, django_assert_num_queries
) -> None:
    # stack, run count and page, run values, attempts, classes, suites, the recipe's run, and
    # the sweeps of the counted runs (their `sweeps` keys only), the matrix runs on its model,
    # and the lanes' places on their classes' boards (per scale and version, a read of its
    # classes' stored boards)
    stack_id = _stack()
    with django_assert_num_queries(12):
        client.get(f"/stacks/{stack_id}/")
    on_class("rtx-4090", *(_run("rtx-4090", {"sweeps": sweeps(40.0 + i)}) for i in range(20)))
    with django_assert_num_queries(12):
        html = client.get(f"/stacks/{stack_id}/").content.decode()
    assert "23 runs with the depth sweep" in html


def test_interval_lines_draw_each_median_with_its_interval_and_gaps() -> None:
    chart = charts.interval_lines(
        [
            (
                "A",
                [
                    ("0", Interval(3, 50.0, 40.0, 60.0)),
                    ("4K", Interval(2)),
                    ("16K", Interval(5, 30.0, 25.0, 35.0)),
                ],
            ),
            ("B", [("0", None), ("4K", Interval(3, 20.0, 10.0, 30.0)), ("16K", None)]),
        ],
        unit="decode tok/s",
    )
    assert chart is not None
    (a, b) = chart.lines
    assert [p.category for p in a.points] == ["0", "16K"] and a.path.count("M") == 2
    assert [(p.low, p.high) for p in a.points] == [(40.0, 60.0), (25.0, 35.0)]
    assert a.points[0].low_y > a.points[0].y > a.points[0].high_y  # the bar spans the interval
    assert [p.category for p in b.points] == ["4K"]
    assert "A: 0 50.0 (95% CI 40.0–60.0) over 3 runs" in chart.describe_intervals()
    assert (
        charts.interval_lines(
            [("A", [("0", Interval(3, 1.0, 1.0, 1.0)), ("4K", Interval(1))])], unit="x"
        )
        is None
    )
