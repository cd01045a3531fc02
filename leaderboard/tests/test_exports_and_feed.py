"""CSV, JSON and Markdown of a filtered view, and its Atom feed."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

import pytest
from django.test import Client

from leaderboard.exports import markdown_text, safe_cell
from leaderboard.tests.factories import HOSTILE, add_runs, record
from submissions.models import Status
from submissions.services import moderate_submission

pytestmark = pytest.mark.django_db
ATOM = "{http://www.w3.org/2005/Atom}"


def _csv(client: Client, query: str = "") -> list[dict]:
    response = client.get(f"/leaderboard/export.csv{query}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_csv_holds_every_row_of_the_filtered_view_in_order(client: Client) -> None:
    add_runs(
        record(model_id="a:8b", overall=50),
        record(model_id="b:8b", overall=70),
        record(model_id="c:8b", overall=60, engine="vllm"),
    )
    rows = _csv(client)
    assert [r["model"] for r in rows] == ["b:8b", "c:8b", "a:8b"]
    assert rows[0]["rank"] == "1" and rows[0]["overall_best_run"] == "70.0"
    assert {r["hardware"] for r in rows} == {"RTX 4090 24 GB"}
    assert rows[0]["hardware_class"] == "rtx-4090-24gb" and rows[0]["few_runs"] == "True"
    assert rows[0]["overall"] == "70.0" and rows[0]["overall_ci95_low"] == ""
    assert rows[0]["decode_tps"] == "50.0" and rows[0]["decode_tps_ci95_low"] == ""
    assert rows[0]["stack_url"].startswith("http://testserver/stacks/")
    assert [r["model"] for r in _csv(client, "?engine=vllm")] == ["c:8b"]
    assert [r["model"] for r in _csv(client, "?sort=model")] == ["a:8b", "b:8b", "c:8b"]


def test_spreadsheet_formulas_are_neutralised(client: Client) -> None:
    add_runs(
        record(
            model_id='=HYPERLINK("http://evil.example","x")',
            engine="@SUM(A1)",
            gpu="=cmd|' /C calc'!A0",
            overall=90,
        ),
        record(model_id="+1+2", engine="-3", gpu="=cmd|' /C calc'!A0", overall=80),
    )
    rows = _csv(client)
    assert rows[0]["model"] == '\'=HYPERLINK("http://evil.example","x")'
    assert rows[0]["engine"] == "'@SUM(A1)"
    assert rows[0]["hardware"].startswith("'=")
    assert rows[1]["model"] == "'+1+2" and rows[1]["engine"] == "'-3"
    for bad in ("\tx", "\rx", "=1", "+1", "-1", "@1"):
        assert safe_cell(bad) == "'" + bad
    assert safe_cell(-1.5) == -1.5 and safe_cell("qwen3") == "qwen3"


def test_json_and_markdown_exports(client: Client) -> None:
    add_runs(record(model_id=HOSTILE, overall=70), record(model_id="plain|pipe:8b", overall=60))
    data = json.loads(client.get("/leaderboard/export.json?sort=overall").content)
    assert data["count"] == 2 and data["query"] == "sort=overall"
    assert data["rows"][0]["model"] == HOSTILE  # JSON carries the data as it is
    markdown = client.get("/leaderboard/export.md").content.decode()
    assert "<script>" not in markdown and "\\<script\\>" in markdown
    assert "plain\\|pipe:8b" in markdown
    assert markdown_text("<b>*x*</b>") == "\\<b\\>\\*x\\*\\</b\\>"
    assert client.get("/leaderboard/export.xlsx").status_code == 404


def test_the_feed_lists_newly_approved_runs_for_a_filter(client: Client) -> None:
    add_runs(record(model_id="on4090:8b"), record(model_id="on3060:8b", gpu="RTX 3060", vram_gb=12))
    response = client.get("/leaderboard/feed.atom?gpu=RTX+4090")
    assert response["Content-Type"].startswith("application/atom+xml")
    feed = ET.fromstring(response.content)
    titles = [e.findtext(f"{ATOM}title") for e in feed.iter(f"{ATOM}entry")]
    assert len(titles) == 1 and titles[0].startswith("qwen3") is False
    assert "on4090:8b" in titles[0]
    assert "RTX 4090" in feed.findtext(f"{ATOM}title")


def test_the_feed_orders_runs_by_their_latest_decision(client: Client) -> None:
    """Run.approved_at follows the submission's decision: a run approved again moves to the
    top, dated as decided (the feed reads the column, not the submission)."""
    first, second = add_runs(record(model_id="first:8b"), record(model_id="second:8b"))

    def entries() -> list[tuple[str, str]]:
        feed = ET.fromstring(client.get("/leaderboard/feed.atom").content)
        return [
            (e.findtext(f"{ATOM}title").split()[0], e.findtext(f"{ATOM}updated"))
            for e in feed.iter(f"{ATOM}entry")
        ]

    assert [title for title, _ in entries()] == ["second:8b", "first:8b"]  # stored together
    decided = moderate_submission(
        submission=first.submission, status=Status.APPROVED, moderator=None, reason="again"
    ).decided_at
    first.refresh_from_db()
    assert first.approved_at == decided and decided > second.approved_at
    (top, updated), _second = entries()
    assert top == "first:8b" and updated.startswith(decided.strftime("%Y-%m-%dT%H:%M:%S"))


def test_hostile_names_are_escaped_in_the_feed(client: Client) -> None:
    add_runs(record(model_id=HOSTILE, gpu=f"NVIDIA {HOSTILE}", submitter=HOSTILE))
    body = client.get("/leaderboard/feed.atom").content.decode()
    assert "<script>" not in body
    feed = ET.fromstring(body)  # still well-formed XML
    entry = next(feed.iter(f"{ATOM}entry"))
    assert HOSTILE in entry.findtext(f"{ATOM}title")
    assert entry.find(f"{ATOM}author").findtext(f"{ATOM}name") == f"{HOSTILE} (imported)"
