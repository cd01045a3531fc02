"""Per-suite columns on the board (issue 29): shown and sorted by the one ranking rule, in the
page (with and without JavaScript), the API and the exports; never a speed suite.

Runs are imported through the real service with the suites a test is about, and put on a
hardware class; the lanes are rebuilt as moderation does.
"""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.db import connection
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext

from leaderboard import cache as board_cache
from leaderboard.filters import BoardFilters
from leaderboard.queries import board
from leaderboard.suite_columns import MISSING_TITLE, SUITE_COLUMNS
from leaderboard.tests.lane_factories import class_record, on_class
from runs.importers.records import ImportedSuite
from runs.matrix import MATRIX_SUITES
from worker.engine.suites import available_suites
from worker.rules.scoring import SPEED_SUITES

pytestmark = pytest.mark.django_db
HW = "?hw=rtx-4090"


def _run(slug: str, model: str, overall: float, **scores: float):
    """A run on the class with these suite scores (and a speed suite, which is never a column)."""
    made = class_record(slug, model_id=model, overall=overall, quality=overall)
    made.suites = [
        ImportedSuite(suite=name, score=score, task_count=10) for name, score in scores.items()
    ]
    made.suites.append(ImportedSuite(suite="speed", score=77.0, task_count=9, pass_count=9))
    return made


@pytest.fixture
def world() -> None:
    """Three stacks on an RTX 4090: "three" has coding in 3 runs (40, 50, 90), "one" in 1 run
    (70) and the best overall, "none" no coding at all (only tool calls)."""
    on_class(
        "rtx-4090",
        _run("rtx-4090", "acme/three-8b", 50, coding=40, toolcall=10),
        _run("rtx-4090", "acme/three-8b", 50, coding=50, toolcall=20),
        _run("rtx-4090", "acme/three-8b", 50, coding=90),
    )
    on_class("rtx-4090", _run("rtx-4090", "acme/one-8b", 60, coding=70, toolcall=30))
    on_class("rtx-4090", _run("rtx-4090", "acme/none-8b", 70, toolcall=80))
    # "three" on a second class: its coding there is never in the RTX 4090's lane.
    on_class("h100", _run("h100", "acme/three-8b", 50, coding=5))


def _query(text: str) -> QueryDict:
    return QueryDict(text.lstrip("?"))


def _board(query: str):
    return board(BoardFilters.from_query(_query(query)))


def _models(html: str) -> list[str]:
    return re.findall(r'class="model-id" href="[^"]*">([^<]+)</a>', html)


def test_the_columns_offered_are_the_engines_quality_suites() -> None:
    quality = set(available_suites()) - SPEED_SUITES - set(MATRIX_SUITES)
    assert set(SUITE_COLUMNS) == quality
    assert not SPEED_SUITES & set(SUITE_COLUMNS)
    asked = BoardFilters.from_query(_query("cols=speed,speed_sweep,coding,toolcall,nope"))
    assert asked.cols == "toolcall,coding"  # the speed suites and unknown names are dropped
    assert BoardFilters.from_query(_query("sort=suite:speed")).sort == ""
    # The speed-only scale has no quality suite: no columns there.
    assert BoardFilters.from_query(_query("cols=coding&scale=speed")).suites == []


def test_a_suite_cell_is_the_median_of_the_lanes_runs_with_its_n(world) -> None:
    rows = {r.stack.model_id: r for r in _board(f"{HW}&cols=coding").rows}
    three = rows["acme/three-8b"].suites["coding"]
    assert (three.median, three.n) == (50.0, 3)  # the H100 run's 5 is another lane's
    assert three.has_interval and three.low <= 50.0 <= three.high
    one = rows["acme/one-8b"].suites["coding"]
    assert (one.median, one.n, one.has_interval) == (70.0, 1, False)
    assert rows["acme/none-8b"].suites["coding"] is None
    # A suite's n is its own: two of the three runs have tool calls.
    rows = {r.stack.model_id: r for r in _board(f"{HW}&cols=toolcall").rows}
    assert (
        rows["acme/three-8b"].suites["toolcall"].median,
        rows["acme/three-8b"].suites["toolcall"].n,
    ) == (15.0, 2)


def test_the_page_shows_the_cells_and_says_where_a_lane_has_no_run_of_the_suite(client, world):
    html = client.get(f"/leaderboard/{HW}&cols=coding").content.decode()
    assert re.search(r'<th scope="col" class="num"[^>]*><a href="[^"]*sort=suite%3Acoding', html)
    cells = re.findall(r'<td class="num col-suite" data-label="Coding">(.*?)</td>', html)
    assert len(cells) == 3
    assert any('<span class="strong fig">50.0</span><span class="ci">' in c for c in cells)
    assert any(
        '<span class="strong fig">70.0</span><span class="ci small-n">1 run</span>' in c
        for c in cells
    )
    assert f'<span title="{MISSING_TITLE}">—</span>' in cells
    # Without columns asked for, none is shown.
    assert "col-suite" not in client.get(f"/leaderboard/{HW}").content.decode()


def test_sorting_by_a_suite_ranks_settled_lanes_first_and_lanes_without_it_last(client, world):
    # Overall alone would put none, one, three.
    html = client.get(f"/leaderboard/{HW}&sort=suite:coding").content.decode()
    assert _models(html) == ["acme/three-8b", "acme/one-8b", "acme/none-8b"]
    assert 'data-label="Coding"' in html  # the sorted suite shows even if not asked for
    ascending = client.get(f"/leaderboard/{HW}&sort=suite:coding&dir=asc").content.decode()
    assert _models(ascending) == ["acme/three-8b", "acme/one-8b", "acme/none-8b"]
    # Tool calls: "three" has 2 runs of it, so every lane has one or two: by the median.
    toolcall = client.get(f"/leaderboard/{HW}&sort=suite:toolcall").content.decode()
    assert _models(toolcall) == ["acme/none-8b", "acme/one-8b", "acme/three-8b"]


def test_run_filtered_and_pooled_views_follow_the_same_rule(client, world):
    # days=30 computes rows from the matching runs: the same figures and order.
    rows = _board(f"{HW}&days=30&sort=suite:coding").rows
    assert [r.stack.model_id for r in rows] == ["acme/three-8b", "acme/one-8b", "acme/none-8b"]
    assert rows[0].suites["coding"].median == 50.0 and rows[0].suites["coding"].n == 3
    # All hardware: quality suites pool across machines (the H100's 5 joins "three"'s).
    pooled = {r.stack.model_id: r for r in _board("?hw=all&cols=coding").rows}
    three = pooled["acme/three-8b"].suites["coding"]
    assert (three.median, three.n) == (45.0, 4)


def test_without_javascript_the_form_sends_one_cols_per_box_and_lands_on_one_link(client, world):
    response = client.get(f"/leaderboard/{HW}&cols=coding&cols=toolcall")
    assert response.status_code == 302
    assert response["Location"] == "/leaderboard/?hw=rtx-4090&cols=toolcall%2Ccoding"
    html = client.get(response["Location"]).content.decode()
    assert 'data-label="Tool calls"' in html and 'data-label="Coding"' in html
    # The form's boxes are ticked for the columns shown, and it keeps working as a plain GET.
    assert re.search(r'name="cols" value="coding" checked', html)
    assert re.search(r'name="cols" value="agent">', html)


def test_the_api_and_exports_carry_the_columns(client, world):
    query = f"{HW}&cols=coding&sort=suite:coding"
    api = client.get(f"/api/v1/leaderboard{query}").json()
    assert api["view"]["suites"] == ["coding"]
    order = [r["stack"]["model_id"] for r in api["results"]]
    assert order == ["acme/three-8b", "acme/one-8b", "acme/none-8b"]
    first = api["results"][0]["suites"]["coding"]
    assert first["value"] == 50.0 and first["n"] == 3 and len(first["ci95"]) == 2
    assert api["results"][1]["suites"]["coding"] == {"value": 70.0, "n": 1, "ci95": None}
    assert api["results"][2]["suites"]["coding"] is None
    assert "suites" not in client.get(f"/api/v1/leaderboard{HW}").json()["results"][0]

    response = client.get(f"/leaderboard/export.csv{query}")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["model"] for r in rows] == order
    assert [r["suite_coding"] for r in rows] == ["50.0", "70.0", ""]
    assert [r["suite_coding_n"] for r in rows] == ["3", "1", "0"]
    markdown = client.get(f"/leaderboard/export.md{query}").content.decode()
    assert "| Coding |" in markdown and "| 50.0 (" in markdown and "70.0 (1 run)" in markdown


def test_a_suite_column_costs_one_query_whatever_the_rows(client, world):
    def count(query: str) -> int:
        board_cache.bump()
        with CaptureQueriesContext(connection) as seen:
            client.get(f"/leaderboard/{query}")
        return len(seen)

    # The estimates' calibration outlives page versions (it is kept by the lanes it reads), and
    # so do the class's estimates once it is in: the first two requests after the lanes change
    # pay for them, so each comparison starts warm.
    count(HW)
    count(HW)
    plain = count(HW)
    assert count(f"{HW}&cols=coding,toolcall,agent") == plain + 1
    assert count(f"{HW}&sort=suite:coding") == plain + 1
    for i in range(8):
        on_class("rtx-4090", _run("rtx-4090", f"acme/more{i}-8b", 30, coding=i))
    count(HW)
    assert count(f"{HW}&cols=coding,toolcall,agent") - count(HW) == 1
