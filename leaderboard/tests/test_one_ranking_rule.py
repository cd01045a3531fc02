"""One ranking rule, the same figure everywhere (issue 29, Must show 2).

Lanes rank by their median (overall on a class board, quality on the all-hardware view). A lane
of one or two runs shows its median with "1 run" or "2 runs" and no interval, and ranks after
the lanes of three runs or more; its best run is evidence and never orders the rows. The board,
the landing page, the stack and compare pages, the API and the CSV give each lane the same
figure and the same place.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from leaderboard import rows as board_rows
from leaderboard.tests.factories import add_runs, record
from runs import lane_rows
from runs.figures import Interval
from runs.models import Lane

pytestmark = pytest.mark.django_db

GPU = "NVIDIA GeForce RTX 3090"
CLASS = "rtx-3090-24gb"
# model: the overall scores of its runs. Medians: solid 61, steady 54, single 70, lucky 65.
LANES = {
    "solid:8b": [60, 61, 62],
    "steady:8b": [50, 52, 54, 56, 58],
    "lucky:8b": [40, 90],  # its best run would top a best-of board
    "single:8b": [70],
}
# Three runs or more first, by median; then the lanes of one or two runs, by median.
ORDER = ["solid:8b", "steady:8b", "single:8b", "lucky:8b"]
MEDIANS = {"solid:8b": 61.0, "steady:8b": 54.0, "lucky:8b": 65.0, "single:8b": 70.0}


@pytest.fixture
def planted() -> dict[str, int]:
    add_runs(
        *(
            record(model_id=model, overall=score, quality=score - 5, gpu=GPU, submitter=f"u{i}")
            for model, scores in LANES.items()
            for i, score in enumerate(scores)
        )
    )
    lanes = Lane.objects.filter(hardware_class__slug=CLASS).select_related("stack")
    return {lane.stack.model_id: lane.stack_id for lane in lanes}


def _board_models(html: str) -> list[str]:
    return re.findall(r'<a class="model-id" href="[^"]*">([^<]+)</a>', html)


def test_the_board_ranks_by_median_with_few_run_lanes_after(client: Client, planted) -> None:
    html = client.get(f"/leaderboard/?hw={CLASS}").content.decode()
    assert _board_models(html) == ORDER
    # The few-run lanes sit under their own heading, after the settled ones.
    heading = html.index("One or two runs")
    assert html.index(">steady:8b<") < heading < html.index(">single:8b<")
    # Their figures are medians with the run count, never "n too small"; best of N is evidence.
    assert re.search(r'65\.0</span><span class="ci small-n">2 runs</span>', html)
    assert re.search(r'70\.0</span><span class="ci small-n">1 run</span>', html)
    assert "best 90.0 of 2" in html
    assert "n too small" not in html
    # The all-hardware view ranks by quality median under the same rule.
    pooled = client.get("/leaderboard/?hw=all").content.decode()
    assert _board_models(pooled) == ORDER


def test_the_figure_and_place_agree_on_every_surface(client: Client, planted) -> None:
    api = client.get(f"/api/v1/leaderboard?hw={CLASS}").json()["results"]
    assert [r["stack"]["model_id"] for r in api] == ORDER
    table = list(csv.DictReader(io.StringIO(client.get(f"/leaderboard/export.csv?hw={CLASS}")
                                            .content.decode())))  # fmt: skip
    assert [r["model"] for r in table] == ORDER
    landing = client.get("/").content.decode()
    top = landing[landing.index('aria-labelledby="top-title"') :]
    for place, model in enumerate(ORDER, start=1):
        median = MEDIANS[model]
        n = len(LANES[model])
        row = api[place - 1]
        assert row["rank"] == place and row["overall"]["value"] == median
        assert row["overall"]["n"] == n and row["few_runs"] == (n < 3)
        assert (row["overall"]["ci95"] is None) == (n < 3)
        assert row["overall_best_run"] == max(LANES[model])
        assert int(table[place - 1]["rank"]) == place
        assert float(table[place - 1]["overall"]) == median
        assert table[place - 1]["few_runs"] == str(n < 3)
        # The stack page: the lane's median and its place on the class's board.
        stack = client.get(f"/stacks/{planted[model]}/").content.decode()
        assert f"#{place} of {len(ORDER)}" in stack
        assert f'<span class="median-value">{median:.1f}</span>' in stack
        assert "n too small" not in stack
        # The landing page's top list: the same figure, in the same order.
        assert f"overall {median:.1f}" in top
    assert re.findall(r">([a-z]+:8b)\b", top)[: len(ORDER)] == ORDER
    # The compare page: the same places and medians side by side.
    ids = ",".join(str(planted[m]) for m in ("lucky:8b", "solid:8b"))
    compare = client.get(f"/compare/?stacks={ids}&hw={CLASS}").content.decode()
    places = re.findall(r'<td class="num lane-place">#(\d+) of (\d+)</td>', compare)
    assert places == [("4", "4"), ("1", "4")]
    assert '<span class="median-value">65.0</span>' in compare and "n too small" not in compare


def test_best_of_n_never_orders_the_rows(client: Client, planted) -> None:
    # Sorting by overall, either way, still sorts by the median, settled lanes first.
    down = _board_models(client.get(f"/leaderboard/?hw={CLASS}&sort=overall").content.decode())
    up = client.get(f"/leaderboard/?hw={CLASS}&sort=overall&dir=asc").content.decode()
    assert down == ORDER
    assert _board_models(up) == ["steady:8b", "solid:8b", "lucky:8b", "single:8b"]
    # A run filter recomputes the rows from the runs by the same rule.
    filtered = client.get(f"/leaderboard/?hw={CLASS}&profile=core").content.decode()
    assert _board_models(filtered) == ORDER


def test_a_run_filtered_row_and_a_stack_pages_lane_are_one_aggregation() -> None:
    """leaderboard.rows.aggregate and runs.lane_rows.lanes read the same runs alike (both are
    runs.lanes.aggregate, the stored lanes' rule): figures, run count and best run."""
    day = datetime(2026, 1, 1, tzinfo=UTC)
    runs = [
        # id, overall, quality, decode, prefill, ttft, days later, submitter
        (1, 60.0, 55.0, 40.0, 900.0, 120.0, 0, "ada"),
        (2, 64.0, 58.0, 44.0, None, 130.0, 1, "bob"),
        (3, 64.0, 50.0, 38.0, 950.0, None, 2, "ada"),
        (4, None, 52.0, 41.0, 920.0, 110.0, 3, "cy"),
    ]
    values = [
        (i, 7, 9, o, q, d, p, t, day + timedelta(days=n), who) for i, o, q, d, p, t, n, who in runs
    ]
    (row,) = board_rows.aggregate(values, scale="v3", pooled=False)
    rows = [
        lane_rows.with_headlines(
            {
                "id": i,
                "hardware_class_id": 9,
                "score_scale": "v3",
                "benchmark_version": "3.0.0",
                "comparable": True,
                "overall_score": o,
                "quality_score": q,
                "decode_tps_median": d,
                "prefill_tps_median": p,
                "ttft_ms_median": t,
                "started_at": day + timedelta(days=n),
                "submitter": who,
            }
        )
        for i, o, q, d, p, t, n, who in runs
    ]
    (lane,) = lane_rows.lanes(rows)
    for name in ("overall", "decode", "prefill", "ttft"):
        assert row.figures[name] == getattr(lane, name), name
    assert row.runs == lane.run_count == 4 and row.submitters == lane.submitters == 3
    assert row.best_run_id == lane.best["id"] == 3  # 64 twice: the newer run
    assert row.figures["decode"] == Interval(4, 40.5, 38.0, 44.0)
