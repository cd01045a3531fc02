"""The board's "Estimated, not measured" section and an arithmetic page in headless Chromium at
1280×800 and 390×844, without JavaScript too: nothing scrolls sideways, the label and both
speeds are on screen in every card. Screenshots go to bench/out/screenshots/estimates/."""

from __future__ import annotations

import pytest

playwright_api = pytest.importorskip("playwright.sync_api")

from leaderboard.tests.test_browser import (  # noqa: E402
    SCREENSHOTS,
    _sync_code_beside_an_event_loop,  # noqa: F401
    browser,  # noqa: F401
)
from leaderboard.tests.test_estimates_board import BOARD, world  # noqa: E402, F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = SCREENSHOTS / "estimates"
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}

CARDS = """() => Array.from(document.querySelectorAll('#estimated .estimate-card')).map(card => {
  const r = card.getBoundingClientRect();
  return {left: r.left, right: r.right, text: card.innerText};
})"""


@pytest.mark.parametrize("javascript", [True, False])
@pytest.mark.parametrize("size", list(SIZES))
def test_the_estimates_fit_and_read_at_both_widths(live_server, world, browser, size, javascript):
    context = browser.new_context(viewport=SIZES[size], java_script_enabled=javascript)
    page = context.new_page()
    page.goto(f"{live_server.url}{BOARD}")
    section = page.locator("#estimated")
    section.scroll_into_view_if_needed()
    assert page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth") <= 0
    cards = page.evaluate(CARDS)
    assert len(cards) == 9
    width = SIZES[size]["width"]
    for card in cards:
        assert card["left"] >= 0 and card["right"] <= width
        assert "estimated, not measured" in card["text"]
        assert "Decode" in card["text"] and "Prefill" in card["text"]
    if javascript:
        SHOTS.mkdir(parents=True, exist_ok=True)
        section.screenshot(path=str(SHOTS / f"board-estimates-{size}.png"))
    page.get_by_role("link", name="The arithmetic").first.click()
    page.wait_for_load_state()
    assert "estimated, not measured" in page.content()
    assert page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth") <= 0
    if javascript:
        page.screenshot(path=str(SHOTS / f"arithmetic-{size}.png"), full_page=True)
    context.close()
