"""The answer above the fold (issue 29) in headless Chromium on demo data: landing page, type
"4090", and the first ranked row is on screen without scrolling at 1280×800 and 390×844, with
JavaScript (the field to type in) and without (the plain select). On a phone each row's
compare box takes its tap (issue 32).

Screenshots of each step go to bench/out/screenshots/picker/ (ignored; CI keeps them).
"""

from __future__ import annotations

import re

import pytest

playwright_api = pytest.importorskip("playwright.sync_api")

from leaderboard.tests.test_browser import (  # noqa: E402
    SCREENSHOTS,
    _sync_code_beside_an_event_loop,  # noqa: F401
    browser,  # noqa: F401
)

pytestmark = pytest.mark.browser
SHOTS = SCREENSHOTS / "picker"
VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
BOARD_4090 = re.compile(r"/leaderboard/\?hw=rtx-4090-24gb$")
FIRST_ROW = "#results table.board tbody tr:not(.class-section)"
# What the element at the centre of each of the first compare boxes is, once scrolled to.
TAPPABLE = """() => Array.from(document.querySelectorAll('#results td.pick input')).slice(0, 6)
  .map(box => {
    box.scrollIntoView({block: 'center'});
    const r = box.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return {id: box.id, hit: hit === box ? 'itself' : hit.tagName + '.' + hit.className,
            x: r.left + r.width / 2, y: r.top + r.height / 2};
  })"""


def _context(browser, device: str, javascript: bool):  # noqa: F811
    return browser.new_context(
        viewport=VIEWPORTS[device],
        java_script_enabled=javascript,
        is_mobile=device == "phone",
        has_touch=device == "phone",
    )


def _first_row_on_screen(page, device: str) -> None:
    """The first ranked row lies wholly inside the viewport, and the page was not scrolled."""
    assert page.evaluate("window.scrollY") == 0
    row = page.locator(FIRST_ROW).first
    assert "RTX 4090 24 GB" in row.inner_text()
    box = row.bounding_box()
    height = VIEWPORTS[device]["height"]
    assert box is not None and box["height"] > 0
    assert box["y"] >= 0 and box["y"] + box["height"] <= height, (device, box)


def test_landing_type_4090_and_the_first_rows_are_above_the_fold(
    live_server,
    demo,
    browser,  # noqa: F811
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []  # the console's errors (a CSP refusal shows there)
    for device in VIEWPORTS:
        context = _context(browser, device, javascript=True)
        page = context.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(f"{live_server.url}/")
        field = page.get_by_role("combobox", name="Your hardware")
        assert field.input_value() == ""  # nothing chosen for the visitor
        page.screenshot(path=SHOTS / f"landing-{device}.png", caret="initial")
        field.click()
        field.press_sequentially("4090")
        options = page.get_by_role("option")
        shown = [o.inner_text() for o in options.all() if o.is_visible()]
        assert shown == ["RTX 4090 24 GB", "2× RTX 4090 24 GB"], shown
        page.screenshot(path=SHOTS / f"landing-typed-4090-{device}.png", caret="initial")
        field.press("Enter")  # the first match
        page.wait_for_url(BOARD_4090)
        _first_row_on_screen(page, device)
        # The choice is remembered: in the URL, and in the field on the board.
        assert page.get_by_role("combobox", name="Your hardware").input_value() == (
            "RTX 4090 24 GB"
        )
        page.screenshot(path=SHOTS / f"board-4090-{device}.png", caret="initial")
        assert not errors, errors
        context.close()


# What a visitor types, and choices the field must then offer.
SEARCHES = {
    "M4 Max": ["Apple M4 Max 128 GB"],
    "24 GB": ["RTX 3090 24 GB", "RTX 4090 24 GB", "2× RTX 3090 24 GB", "any GPU with 24 GB",
              "fits in 24 GB"],
    "CPU": ["any CPU-only machine"],
    "rtx4090": ["RTX 4090 24 GB", "2× RTX 4090 24 GB"],
}  # fmt: skip


def _shown(page) -> list[str]:
    return [o.inner_text() for o in page.get_by_role("option").all() if o.is_visible()]


def test_the_field_finds_chips_sizes_and_kinds(live_server, demo, browser) -> None:  # noqa: F811
    context = _context(browser, "desktop", javascript=True)
    page = context.new_page()
    page.goto(f"{live_server.url}/leaderboard/")
    field = page.get_by_role("combobox", name="Your hardware")
    for typed, expected in SEARCHES.items():
        field.fill("")
        field.press_sequentially(typed)
        shown = _shown(page)
        assert set(expected) <= set(shown), (typed, shown)
    field.fill("")
    field.press_sequentially("CPU")
    assert all("CPU" in label for label in _shown(page))
    assert any(label.startswith("CPU only: ") for label in _shown(page))
    field.fill("")
    field.press_sequentially("24 GB")
    assert all(" 24 GB" in label for label in _shown(page))  # a CPU with 24 GB counts too

    # A choice reloads the results in place, and the address bar keeps it.
    page.get_by_role("option", name="any GPU with 24 GB").click()
    page.wait_for_url(re.compile(r"/leaderboard/\?vram=24$"))
    # The new results replace the old section, not nest inside it.
    assert page.locator("#results").count() == 1
    assert "RTX 4090 24 GB" in page.locator("#results").inner_text()
    # Back brings htmx's copy of the page: the field must work there too.
    page.go_back()
    page.wait_for_url(re.compile(r"/leaderboard/$"))
    field = page.get_by_role("combobox", name="Your hardware")
    field.click()
    field.press_sequentially("4090")
    field.press("Enter")
    page.wait_for_url(re.compile(r"/leaderboard/\?hw=rtx-4090-24gb$"))
    page.reload()
    assert page.get_by_role("combobox", name="Your hardware").input_value() == "RTX 4090 24 GB"
    context.close()


def test_the_same_without_javascript_with_the_plain_select(live_server, demo, browser) -> None:  # noqa: F811
    SHOTS.mkdir(parents=True, exist_ok=True)
    for device in VIEWPORTS:
        context = _context(browser, device, javascript=False)
        page = context.new_page()
        page.goto(f"{live_server.url}/")
        assert page.locator("#landing-hw").input_value() == ""
        page.screenshot(path=SHOTS / f"landing-nojs-{device}.png", caret="initial")
        # Nothing chosen: the browser asks for a choice instead of sending one for you.
        page.get_by_role("button", name="Show stacks on it").click()
        assert page.url == f"{live_server.url}/"
        page.select_option("#landing-hw", label="RTX 4090 24 GB")
        page.screenshot(path=SHOTS / f"landing-nojs-chose-4090-{device}.png", caret="initial")
        page.get_by_role("button", name="Show stacks on it").click()
        page.wait_for_url(BOARD_4090)
        _first_row_on_screen(page, device)
        assert page.locator("#f-hw").input_value() == "rtx-4090-24gb"
        page.screenshot(path=SHOTS / f"board-nojs-4090-{device}.png", caret="initial")
        context.close()


def test_on_a_phone_each_compare_box_takes_its_tap(live_server, demo, browser) -> None:  # noqa: F811
    # The card layout is CSS alone; the script only reads what is at each box's centre.
    context = _context(browser, "phone", javascript=True)
    page = context.new_page()
    page.goto(f"{live_server.url}/leaderboard/?hw=rtx-4090-24gb")
    boxes = page.evaluate(TAPPABLE)
    assert len(boxes) >= 2
    assert [b["hit"] for b in boxes] == ["itself"] * len(boxes), boxes
    first, second = boxes[0], boxes[1]
    for box in (first, second):
        page.locator(f"#{box['id']}").scroll_into_view_if_needed()
        centre = page.evaluate(
            "id => { const r = document.getElementById(id).getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; }",
            box["id"],
        )
        page.touchscreen.tap(*centre)
        assert page.locator(f"#{box['id']}").is_checked(), box
    context.close()
