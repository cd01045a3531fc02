"""The sweeps ("Speed at depth and under concurrency") of the stack and run pages in Chromium at
390 and 1280 px, with and without JavaScript: the curves and tables are on screen, nothing in the
section is wider than the page, and axe-core finds nothing serious in it. Screenshots go to
bench/out/screenshots/sweeps/ (ignored; CI keeps them)."""

from __future__ import annotations

import pytest

playwright_api = pytest.importorskip("playwright.sync_api")

from leaderboard.tests.lane_factories import class_record, on_class  # noqa: E402
from leaderboard.tests.sweep_bundles import SKIPPED, sweeps  # noqa: E402
from leaderboard.tests.test_browser import (  # noqa: E402,F401  (shared fixtures)
    SCREENSHOTS,
    _sync_code_beside_an_event_loop,
    browser,
)
from leaderboard.tests.test_browser_axe import RUN_AXE, axe_script  # noqa: E402,F401

pytestmark = pytest.mark.browser
SHOTS = SCREENSHOTS / "sweeps"
# Everything in the section but what sits inside a sideways-scrolling table frame.
WIDEST_CHILD = """() => Math.max(...Array.from(document.querySelectorAll('#sweeps *'))
  .filter(el => !el.closest('.table-wrap') || el.classList.contains('table-wrap'))
  .map(el => el.getBoundingClientRect().right))"""


def _runs() -> tuple[int, int]:
    made = []
    for slug, speeds in (("rtx-4090", (50.0, 52.0, 54.0)), ("h100", (300.0, 310.0, 305.0))):
        for decode in speeds:
            record = class_record(slug)
            record.raw_payload = {"sweeps": sweeps(decode)}
            made.append(record)
    runs = on_class("rtx-4090", *made[:3]) + on_class("h100", *made[3:])
    return runs[0].stack_id, runs[0].id


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_the_sweeps_fit_a_phone_and_a_desktop(live_server, browser, javascript) -> None:  # noqa: F811
    stack_id, run_id = _runs()
    SHOTS.mkdir(parents=True, exist_ok=True)
    name = "js" if javascript else "no-js"
    for width in (390, 1280):
        context = browser.new_context(
            viewport={"width": width, "height": 900}, java_script_enabled=javascript
        )
        page = context.new_page()
        try:
            for path, shot in ((f"/stacks/{stack_id}/", "stack"), (f"/runs/{run_id}/", "run")):
                assert page.goto(f"{live_server.url}{path}").status == 200
                section = page.locator("#sweeps")
                section.scroll_into_view_if_needed()
                assert section.is_visible()
                overflow = page.evaluate(
                    "document.scrollingElement.scrollWidth - window.innerWidth"
                )
                assert overflow <= 0, f"{shot}@{width}: the page scrolls sideways by {overflow}px"
                assert page.evaluate(WIDEST_CHILD) <= width + 0.5, f"{shot}@{width}"
                text = section.inner_text()
                assert SKIPPED in text and "16K" in text
                if shot == "stack":
                    svg = page.locator("#sweeps svg").first
                    box = svg.bounding_box()
                    assert box is not None and box["width"] > 0.6 * min(width, 700)
                    assert box["x"] >= 0 and box["x"] + box["width"] <= width
                    assert "52.0" in text and "305.0" in text
                    assert (
                        page.locator("#sweeps svg circle.pt").count() == 4 * 2 * 3
                    )  # four charts, two classes, three cells
                section.screenshot(path=str(SHOTS / f"{shot}-sweeps-{name}-{width}.png"))
        finally:
            context.close()


def test_axe_finds_nothing_serious_in_the_sweeps(live_server, browser, axe_script) -> None:  # noqa: F811
    stack_id, run_id = _runs()
    findings = []
    for width in (390, 1280):
        context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)
        page = context.new_page()
        for path in (f"/stacks/{stack_id}/", f"/runs/{run_id}/"):
            page.goto(f"{live_server.url}{path}")
            page.add_script_tag(path=str(axe_script))
            for v in page.evaluate(RUN_AXE):
                findings.append(f"{path} {width}px: {v['impact']} {v['id']} at {v['targets']}")
        context.close()
    assert not findings, "\n".join(findings)
