"""The real community data on the public site: imported through `import_results` as the docs
say, the boards of RTX 4090, RTX 3090, Apple M4 Max and CPU-only machines show its rows with
their method and provenance, and a crawl of every public page, export and API answer finds
none of the private strings the sources hold (addresses, home folders, host names, the
LocalMaxxing submitters' user names)."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import call_command
from django.test import Client

from runs.models import HardwareClass, Run
from runs.tests.test_import_real_data import CACHE, PRIVATE, REAL
from submissions.tests.test_privacy_crawl import _crawl

pytestmark = pytest.mark.skipif(not CACHE.is_file(), reason=f"no real data at {REAL}")

# Words the site itself prints (the landing page's `--url http://127.0.0.1:8080` example, the
# methodology's "Remote endpoints", ":8080" inside a JSON number): what a source held of them
# is caught by the private-address pattern and the source's own phrase instead.
SITE_WORDS = {"127.0.0.1", "0.0.0.0", "localhost", ":8000", ":8080", ":11434", ":11435"}
SITE_WORDS |= {"Remote endpoint"}
PRIVATE_ADDRESS = re.compile(
    r"\b(?:10\.\d{1,3}|192\.168|172\.(?:1[6-9]|2\d|3[01]))\.\d{1,3}\.\d{1,3}\b"
)
PICKED = {
    "RTX 4090": "rtx-4090-24gb",
    "RTX 3090": "rtx-3090-24gb",
    "Apple M4 Max": "apple-m4-max-",
}


def _usernames() -> set[str]:
    """LocalMaxxing's submitters, except those whose name is a model publisher's (it is part of
    the public model id, like "unsloth/...")."""
    presets = json.loads(CACHE.read_text(encoding="utf-8"))["presets"]
    rows = [row for preset in presets.values() for row in preset["rows"]]
    publishers = {
        str((row.get("model") or {}).get("hfId") or "").split("/")[0].lower() for row in rows
    }
    names = {str((row.get("user") or {}).get("username") or "") for row in rows}
    return {name for name in names if len(name) >= 4 and name.lower() not in publishers}


@pytest.mark.django_db(transaction=True)
def test_picked_hardware_shows_real_rows_with_method_and_provenance(
    client: Client, settings, fixtures_dir
) -> None:
    # README command 1's data: seed_real, the community sources and the earlier product's runs
    # (one of which is a v3 run on an RTX 4090: the busier speed-only board still opens).
    settings.BENCHLOOP_FIXTURES_DIR, settings.BENCHLOOP_REAL_DATA_DIR = fixtures_dir, REAL
    out = io.StringIO()
    call_command("seed_real", stdout=out)
    assert out.getvalue().splitlines()[-2].endswith("real runs, none synthetic")
    landing = client.get("/").content.decode()
    assert "Where the runs come from" in landing and "imported from" in landing
    assert "Demo data" not in landing  # nothing synthetic was seeded
    for name, slug in PICKED.items():
        found = HardwareClass.objects.filter(slug__startswith=slug).order_by("slug").first()
        assert found is not None, name
        assert f'value="{found.slug}"' in landing  # offered by the landing page's picker
        board = client.get(f"/leaderboard/?hw={found.slug}").content.decode()
        rows = re.findall(r'<a class="model-id" href="/stacks/(\d+)/', board)
        assert rows, f"no rows on {found.label}"
        assert "Speeds here were measured by" in board and "not verified" in board
        assert "imported:" in board  # each row's evidence names its source
        run = Run.objects.published().filter(stack_id=rows[0], hardware_class=found).first()
        page = client.get(f"/runs/{run.id}/").content.decode()
        assert "measured by" in page and run.trust_tier in page
        assert 'id="provenance"' in page and run.provenance["path"] in page
        assert f"https://github.com/{run.provenance['repository']}/blob/" in page
    cpu = client.get("/leaderboard/?hw=kind:cpu", follow=True).content.decode()
    assert re.findall(r'<a class="model-id" href="/stacks/\d+/', cpu), "no CPU-only rows"


@pytest.mark.django_db(transaction=True)
def test_no_private_string_from_the_sources_reaches_a_public_page(client: Client) -> None:
    call_command("import_results", str(REAL), stdout=io.StringIO())
    classes = HardwareClass.objects.filter(runs__published=True).distinct()
    starts = ["/", "/leaderboard/", "/data/", "/leaderboard/feed.atom", "/api/v1/runs"]
    for found in classes:
        starts += [
            f"/leaderboard/?hw={found.slug}",
            f"/leaderboard/export.csv?hw={found.slug}",
            f"/leaderboard/export.json?hw={found.slug}",
            f"/api/v1/leaderboard?hw={found.slug}",
        ]
    runs = Run.objects.published().order_by("id").values_list("id", "stack_id")
    for run_id, stack_id in list(runs)[::7]:
        starts += [f"/runs/{run_id}/", f"/stacks/{stack_id}/", f"/api/v1/runs/{run_id}"]
    pages = _crawl(client, starts, limit=len(starts) + 150)
    needles = [n for n in PRIVATE if n not in SITE_WORDS] + ["Remote endpoint:"]
    needles += sorted(_usernames())
    leaks = {
        needle: [url for url, body in pages.items() if needle in body][:3]
        for needle in needles
        if any(needle in body for body in pages.values())
    }
    assert not leaks, leaks
    addresses = {url: PRIVATE_ADDRESS.findall(body) for url, body in pages.items()}
    assert not {url: found for url, found in addresses.items() if found}
    assert len(pages) > 300
