"""A new benchmark version's first runs never empty a board (issue 29): each view ranks the
version with the most rows in it, names the others, and every other class's board, the
landing page, the API and the CSV stay as they were."""

from __future__ import annotations

import pytest
from django.test import Client

from leaderboard.tests.factories import add_runs, record

pytestmark = pytest.mark.django_db


def _results(html: str) -> str:
    """The board's ranked part (the menus above it rightly gain the new class and model)."""
    start = html.index('<section id="results"')
    return html[start : html.index("</section>", start)]


def _views(client: Client) -> dict[str, str]:
    views = {
        path: client.get(path).content.decode()
        for path in (
            "/leaderboard/?hw=rtx-3090-24gb",
            "/api/v1/leaderboard?hw=rtx-3090-24gb",
            "/leaderboard/export.csv?hw=rtx-3090-24gb",
        )
    }
    views["/leaderboard/?hw=rtx-3090-24gb"] = _results(views["/leaderboard/?hw=rtx-3090-24gb"])
    # The landing page's top rows are the busiest class's: the RTX 3090's here.
    views["/"] = _results_of_landing(client.get("/").content.decode())
    return views


def _results_of_landing(html: str) -> str:
    start = html.index('<section aria-labelledby="top-title">')
    return html[start : html.index("</section>", start)]


def test_a_new_versions_first_run_leaves_every_other_board_as_it_was(client: Client) -> None:
    on_3090 = dict(gpu="NVIDIA GeForce RTX 3090", benchmark_version="3.0.0")
    on_4090 = dict(gpu="NVIDIA GeForce RTX 4090", benchmark_version="3.0.0")
    add_runs(
        *(record(model_id=f"old{i}:8b", overall=60 + i, **on_3090) for i in range(3)),
        *(record(model_id=f"old{i}:8b", overall=50 + i, **on_4090) for i in range(2)),
    )
    before = _views(client)
    assert "old2:8b" in before["/leaderboard/?hw=rtx-3090-24gb"] and "old2:8b" in before["/"]

    # One new version's run, approved, on the other class.
    add_runs(record(model_id="new:8b", overall=99, gpu="NVIDIA GeForce RTX 4090",
                    benchmark_version="4.0.0"))  # fmt: skip

    assert _views(client) == before
    board = client.get("/leaderboard/?hw=rtx-4090-24gb").content.decode()
    # That class still ranks the version most of its rows are on, and offers the new one.
    assert "old1:8b" in board and "new:8b" not in board
    assert "this view shows 3.0.0, the version with the most rows here" in board
    assert (
        'Other versions: <a href="/leaderboard/?bv=4.0.0&amp;hw=rtx-4090-24gb">4.0.0</a>' in board
    )
    newer = client.get("/leaderboard/?hw=rtx-4090-24gb&bv=4.0.0").content.decode()
    assert "new:8b" in newer and "old1:8b" not in newer
