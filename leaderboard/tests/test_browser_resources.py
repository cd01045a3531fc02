"""The run page's "Memory, energy and cold start" in headless Chromium at 390 and 1280 px: the
figures are on screen, the page does not scroll sideways, and nothing in the section is wider
than the page. Screenshots go to bench/out/screenshots/resources/ (ignored; CI keeps them)."""

from __future__ import annotations

import pytest

playwright_api = pytest.importorskip("playwright.sync_api")

from leaderboard.tests.factories import add_runs, record  # noqa: E402
from leaderboard.tests.test_browser import (  # noqa: E402,F401  (shared fixtures)
    SCREENSHOTS,
    _sync_code_beside_an_event_loop,
    browser,
)
from leaderboard.tests.test_run_page_resources import MEASURED, NO_GPU  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = SCREENSHOTS / "resources"
WIDEST_CHILD = """() => Math.max(...Array.from(document.querySelectorAll('#resources *'))
  .map(el => el.getBoundingClientRect().right))"""


@pytest.mark.parametrize("name, raw", [("measured", MEASURED), ("no-gpu", NO_GPU)])
def test_the_section_fits_a_phone_and_a_desktop(live_server, browser, name, raw) -> None:  # noqa: F811
    uploaded = record()
    uploaded.raw_payload = raw
    (run,) = add_runs(uploaded)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in (390, 1280):
        page = browser.new_page(viewport={"width": width, "height": 900})
        try:
            assert page.goto(f"{live_server.url}/runs/{run.id}/").status == 200
            section = page.locator("#resources")
            section.scroll_into_view_if_needed()
            assert section.is_visible()
            overflow = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"{name}@{width}: the page scrolls sideways by {overflow}px"
            assert page.evaluate(WIDEST_CHILD) <= width + 0.5, f"{name}@{width}"
            for selector in ("#energy-output", "#peak-vram", "#peak-ram", "#cold-load"):
                box = page.locator(selector).bounding_box()
                assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
            text = section.inner_text()
            if name == "measured":
                assert "4.123 J" in text and "15.29 GiB" in text and "12.3 s" in text
            else:
                assert "not measured" in text and "0.39 GiB" in text
            section.screenshot(path=str(SHOTS / f"run-resources-{name}-{width}.png"))
        finally:
            page.close()
