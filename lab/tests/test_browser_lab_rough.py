"""Issue 32 on the lab's pages in headless Chromium: /lab/hosts/ on a phone has no serious axe
finding (each box that scrolls sideways is focusable and named), and a fresh install's queue
shows what a job looks like, marked as an example."""

from __future__ import annotations

import pytest

from lab.tests.test_browser_lab import (  # noqa: F401
    _sync_code_beside_an_event_loop,
    browser,
)
from leaderboard.tests.test_browser_axe import RUN_AXE, axe_script  # noqa: F401
from leaderboard.tests.test_browser_layout import signed_in

pytestmark = pytest.mark.browser
PHONE = {"width": 390, "height": 844}
WIDE = {"width": 1280, "height": 800}


def test_the_hosts_page_has_no_serious_axe_finding_on_a_phone(
    live_server,
    browser,  # noqa: F811
    axe_script,  # noqa: F811
    operator,
    lab_hosts,
) -> None:
    for viewport in (PHONE, WIDE):
        context = signed_in(
            browser, live_server, operator, viewport=viewport, bypass_csp=True,
            is_mobile=viewport is PHONE,
        )  # fmt: skip
        page = context.new_page()
        assert page.goto(f"{live_server.url}/lab/hosts/").status == 200
        page.add_script_tag(path=str(axe_script))
        findings = page.evaluate(RUN_AXE)
        assert findings == [], (viewport, findings)
        boxes = page.locator(".table-wrap")
        assert boxes.count() >= 1
        for index in range(boxes.count()):
            assert boxes.nth(index).get_attribute("tabindex") == "0"
            assert boxes.nth(index).get_attribute("aria-label")
        context.close()


def test_an_empty_queue_shows_an_example_job_marked_as_one(
    live_server,
    browser,  # noqa: F811
    axe_script,  # noqa: F811
    db,
) -> None:
    from lab.models import BenchmarkJob

    assert not BenchmarkJob.objects.exists()
    for viewport in (PHONE, WIDE):
        context = browser.new_context(viewport=viewport, bypass_csp=True)
        page = context.new_page()
        assert page.goto(f"{live_server.url}/lab/").status == 200
        example = page.locator("section.example-job")
        assert example.is_visible()
        assert "example" in example.locator("h2").inner_text().lower()
        assert "not a real job" in example.inner_text()
        row = example.locator("tbody tr")
        assert row.count() == 1 and "example" in row.locator("td").first.inner_text()
        page.add_script_tag(path=str(axe_script))
        assert page.evaluate(RUN_AXE) == []
        context.close()
