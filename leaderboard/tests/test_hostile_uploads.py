"""A run uploaded through the real API with hostile strings in every public field cannot run a
script in any output: HTML pages, their inline SVG charts and share tags, CSV, JSON and Markdown
exports, the Atom feeds, the share PNGs and the API. The lab's pages and feed likewise."""

from __future__ import annotations

import copy
import csv
import io
import json
import re
import struct
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from urllib.parse import quote

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from lab import services as lab
from lab.models import BenchmarkJob
from leaderboard.tests.factories import add_runs, record
from leaderboard.tests.lane_factories import refresh_lanes
from runs.models import HardwareClass, Run
from submissions.models import Submission
from submissions.services import moderate_submission
from submissions.tests.conftest import post_json

pytestmark = pytest.mark.django_db
ATOM = "{http://www.w3.org/2005/Atom}"
SCRIPT = "<script>alert(1)</script>"
ATTRIBUTE = "\"onmouseover=alert(2) x='"
HOSTILE = SCRIPT + ATTRIBUTE
INLINE_SCRIPT = re.compile(r"<script\b(?![^>]*\bsrc=)[^>]*>", re.I)
FORMULA = '=HYPERLINK("http://evil.example","x")'


class _Elements(HTMLParser):
    """Every start tag and attribute a browser would build from the page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append(tag)
        self.attributes.extend(attrs)


def assert_inert_html(html: str, url: str, *, shown: bool = True) -> None:
    parser = _Elements()
    parser.feed(html)
    assert not INLINE_SCRIPT.search(html) and SCRIPT not in html, url
    assert not [name for name, _ in parser.attributes if name.startswith("on")], url
    assert not [
        v for _, v in parser.attributes if v and v.strip().lower().startswith("javascript:")
    ]
    assert escape(SCRIPT) in html or not shown, f"{url} does not show the name at all"


@pytest.fixture
def hostile_run(alice, alice_key, smoke_run, bob) -> Run:
    payload = copy.deepcopy(smoke_run)
    payload["model"]["model_id"] = f"m{HOSTILE}:8b"
    payload["model"]["quantization"] = FORMULA
    payload["model"]["family"] = HOSTILE
    payload["machine"].update(gpu=f"NVIDIA {HOSTILE}", cpu=f"@{HOSTILE}", os=SCRIPT)
    response = post_json(Client(), "/api/v1/runs", payload, alice_key)
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    moderate_submission(
        submission=Submission.objects.get(run=run), status="approved", moderator=bob
    )
    if Run.objects.get(pk=run.pk).hardware_class_id is None:
        # A class named like the hostile GPU, so the stack page draws its lanes and charts
        # (until uploads derive the class themselves).
        hostile = HardwareClass.objects.create(
            key="test:hostile", slug="hostile-gpu", kind="gpu", label=f"NVIDIA {HOSTILE}"
        )
        Run.objects.filter(pk=run.pk).update(hardware_class=hostile)
    refresh_lanes([run.stack_id])
    return Run.objects.select_related("stack").get(pk=run.pk)


def test_html_pages_their_charts_and_share_tags_stay_inert(hostile_run) -> None:
    run = hostile_run
    client = Client()
    pages = [
        "/leaderboard/",
        "/leaderboard/?scale=all&comparable=all",
        f"/leaderboard/?q={quote(HOSTILE)}",
        f"/runs/{run.id}/",
        f"/stacks/{run.stack_id}/",
        f"/models/{quote(run.stack.model_id)}/",
        f"/hardware/{run.hardware_id}/",
        "/submitters/alice/",
        f"/compare/?stacks={run.stack_id}",
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        assert_inert_html(response.content.decode(), url)
    assert_inert_html(client.get("/").content.decode(), "/", shown=False)  # verified runs only
    stack_page = client.get(f"/stacks/{run.stack_id}/").content.decode()
    assert "<svg" in stack_page and "og:title" in stack_page  # charts and share tags were there


def test_the_exports_neutralise_formulas_and_markup(hostile_run) -> None:
    client = Client()
    csv_response = client.get("/leaderboard/export.csv?scale=all&comparable=all")
    rows = list(csv.DictReader(io.StringIO(csv_response.content.decode())))
    row = next(r for r in rows if SCRIPT in r["model"])
    assert row["quantization"].startswith("'=HYPERLINK") and row["hardware"][0] not in "=+-@"
    for cell in (value for r in rows for value in r.values()):
        assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
    markdown = client.get("/leaderboard/export.md?scale=all&comparable=all").content.decode()
    # Every < is backslash-escaped, so a Markdown renderer shows it instead of parsing HTML.
    assert "\\<script\\>" in markdown and not re.search(r"(?<!\\)<", markdown)
    exported = client.get("/leaderboard/export.json?scale=all&comparable=all")
    # JSON carries the data as it is, but as JSON: no browser will render it as a page.
    assert exported["Content-Type"].startswith("application/json")
    assert exported["X-Content-Type-Options"] == "nosniff"
    assert SCRIPT in exported.json()["rows"][0]["model"]


def test_the_api_serves_the_data_only_as_json(hostile_run) -> None:
    client = Client()
    for url in (
        f"/api/v1/runs/{hostile_run.id}",
        f"/api/v1/stacks/{hostile_run.stack_id}",
        "/api/v1/leaderboard?scale=all",
        "/api/v1/hardware",
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        assert response["Content-Type"] == "application/json", url
        assert response["X-Content-Type-Options"] == "nosniff", url
        assert SCRIPT in json.dumps(response.json()) or url.endswith("hardware"), url
        # No browsable-API renderer can be asked for: it would put the data in an HTML page.
        html = client.get(
            url + ("&" if "?" in url else "?") + "format=api", HTTP_ACCEPT="text/html"
        )
        assert "text/html" not in html.get("Content-Type", ""), url


def test_the_atom_feeds_keep_names_as_text(hostile_run, operator) -> None:
    job = lab.queue_job(requested_by=operator, model=f"m{HOSTILE}", endpoint_url="http://h/v1")
    BenchmarkJob.objects.filter(pk=job.pk).update(
        status=BenchmarkJob.Status.FAILED,
        error=f"server said {HOSTILE}",
        finished_at=timezone.now(),
    )
    for url in ("/leaderboard/feed.atom?scale=all&comparable=all", "/lab/jobs/feed.atom"):
        feed = ET.fromstring(Client().get(url).content)  # well-formed XML
        entries = list(feed.iter(f"{ATOM}entry"))
        assert entries, url
        # A reader renders the text of a type="html" element as HTML: it must hold no markup.
        for element in feed.iter():
            if element.get("type") == "html":
                assert "<script" not in (element.text or ""), (url, element.text)
                assert " onmouseover=" not in (element.text or ""), (url, element.text)
        assert any(SCRIPT in (e.findtext(f"{ATOM}title") or "") for e in entries), url


def _png_chunks(data: bytes) -> list[bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        chunks.append(data[offset + 4 : offset + 8])
        offset += 12 + length
    return chunks


def test_share_images_carry_no_text_metadata(hostile_run) -> None:
    run = hostile_run
    (other,) = add_runs(record(model_id="plain:8b"))
    for url in (
        f"/runs/{run.id}/share.png",
        f"/stacks/{run.stack_id}/share.png",
        f"/compare/share.png?stacks={run.stack_id},{other.stack_id}",
    ):
        response = Client().get(url)
        assert response["Content-Type"] == "image/png", url
        chunks = _png_chunks(response.content)
        assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND"
        assert not {b"tEXt", b"iTXt", b"zTXt", b"eXIf"} & set(chunks), url
        assert b"script" not in response.content


def test_lab_pages_escape_operator_supplied_text(operator) -> None:
    job = lab.queue_job(requested_by=operator, model=f"m{HOSTILE}", endpoint_url="http://h/v1")
    BenchmarkJob.objects.filter(pk=job.pk).update(error=f"server said {HOSTILE}")
    for url in ("/lab/", f"/lab/jobs/{job.pk}/"):
        assert_inert_html(Client().get(url).content.decode(), url)
