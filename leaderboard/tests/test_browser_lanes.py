"""Stack, compare, model and run pages in headless Chromium, with and without JavaScript:
hardware lanes with CI95, distinct compare labels, attempts, and the filter form.

Screenshots at 1280 and 390 px go to bench/out/screenshots/lanes-*.png.
"""

from __future__ import annotations

import re

import pytest

from leaderboard.tests.lane_factories import class_record, on_class
from submissions.models import Status

playwright_api = pytest.importorskip("playwright.sync_api")

# The browser and the sync-code switch are the main browser tests' own fixtures.
from leaderboard.tests.test_browser import (  # noqa: E402
    SCREENSHOTS,
    _sync_code_beside_an_event_loop,  # noqa: F401
    browser,  # noqa: F401
)

pytestmark = pytest.mark.browser
WIDE = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
SAME = {"model_id": "qwen3:32b", "quantization": "Q8_0", "engine": "ollama"}


@pytest.fixture
def stacks(transactional_db) -> dict:
    """Two stacks that differ only in harness; the first on three classes, with attempts."""
    raw = on_class(
        "rtx-4090",
        *(
            class_record("rtx-4090", decode=d, submitter=s, **SAME)
            for d, s in ((40, "ada"), (42, "grace"), (44, "ada"), (46, "grace"))
        ),
    )
    on_class("rtx-4090", class_record("rtx-4090", decode=90, **SAME), status=Status.REJECTED)
    on_class("h100", *(class_record("h100", decode=d, **SAME) for d in (300, 310, 320)))
    on_class("cpu-epyc", class_record("cpu-epyc", decode=9, **SAME))
    agent = on_class(
        "rtx-4090",
        *(class_record("rtx-4090", decode=d, harness="mini-swe", **SAME) for d in (50, 52, 54)),
    )
    return {"raw": raw[0].stack_id, "agent": agent[0].stack_id, "run": raw[0].id}


def _lanes(page) -> dict[str, str]:
    rows = page.locator("table.lane-table tbody tr")
    return {
        rows.nth(i).locator("th").inner_text(): rows.nth(i).inner_text()
        for i in range(rows.count())
    }


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_lanes_filters_compare_labels_and_attempts(live_server, browser, stacks, javascript):  # noqa: F811
    context = browser.new_context(viewport=WIDE, java_script_enabled=javascript)
    page = context.new_page()
    page.goto(f"{live_server.url}/stacks/{stacks['raw']}/")
    lanes = _lanes(page)
    assert list(lanes) == ["RTX 4090 24 GB", "H100 80 GB", "CPU only: AMD EPYC 9454"]
    assert "43.0" in lanes["RTX 4090 24 GB"] and "95% CI 40.0–46.0" in lanes["RTX 4090 24 GB"]
    assert "95% CI 300.0–320.0" in lanes["H100 80 GB"]
    assert "1 run" in lanes["CPU only: AMD EPYC 9454"]  # a median without an interval
    # Attempts: the rejected upload counts, and it is on the page for anyone.
    assert "best of 5 attempts" in lanes["RTX 4090 24 GB"]
    assert page.get_by_text("Quality, all hardware pooled:").is_visible()

    # The filter form is a plain GET form: it works the same without JavaScript.
    page.select_option("#f-hw", "h100")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(rf"/stacks/{stacks['raw']}/\?hw=h100$"))
    assert list(_lanes(page)) == ["H100 80 GB"]
    assert page.locator(".active-filters").inner_text().startswith("Only runs matching H100")

    page.goto(f"{live_server.url}/compare/?stacks={stacks['raw']},{stacks['agent']}")
    labels = page.locator(".compare-head .stack-label").all_inner_texts()
    assert len(labels) == 2 and len(set(labels)) == 2
    assert "qwen3:32b Q8_0 · ollama · mini-swe harness" in labels
    assert page.get_by_role("heading", name="On RTX 4090 24 GB", exact=True).is_visible()
    attempts = page.locator("table.compare-table tr", has_text="Attempts").first.inner_text()
    assert "best of 5" in attempts and "best of 3" in attempts
    decode = page.locator("table.compare-table tr", has_text="Decode tok/s").first.inner_text()
    assert "95% CI" in decode and re.search(r"\+\d", decode)
    assert page.locator(".verdict").count() == 1
    context.close()


def test_screenshots_at_desktop_and_phone_width(live_server, browser, stacks) -> None:  # noqa: F811
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    pages = {
        "stack": f"/stacks/{stacks['raw']}/",
        "compare": f"/compare/?stacks={stacks['raw']},{stacks['agent']}",
        "model": "/models/qwen3:32b/",
        "run": f"/runs/{stacks['run']}/",
    }
    for device, viewport in (("1280", WIDE), ("390", PHONE)):
        context = browser.new_context(viewport=viewport, is_mobile=device == "390")
        page = context.new_page()
        for name, path in pages.items():
            response = page.goto(f"{live_server.url}{path}")
            assert response.status == 200, path
            # Nothing may overflow the viewport sideways except inside a scroll box.
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 1, f"{name} at {device}px overflows by {overflow}px"
            page.screenshot(path=SCREENSHOTS / f"lanes-{name}-{device}.png", full_page=True)
        context.close()
