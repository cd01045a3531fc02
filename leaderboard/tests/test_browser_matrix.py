"""The harness matrix page in headless Chromium (issue 19), with and without JavaScript, at
desktop and phone width. Screenshots go to the test's tmp dir and bench/out/screenshots/matrix/
(ignored; CI keeps them as artifacts)."""

from __future__ import annotations

import shutil

import pytest

playwright_api = pytest.importorskip("playwright.sync_api")

from leaderboard.tests.test_browser import (  # noqa: E402
    DESKTOP,
    PHONE,
    SCREENSHOTS,
    _sync_code_beside_an_event_loop,  # noqa: F401
    browser,  # noqa: F401
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = SCREENSHOTS / "matrix"
SIDEWAYS = "() => document.documentElement.scrollWidth - window.innerWidth"


def _matrix_url() -> str:
    from django.urls import reverse

    from leaderboard.tests.factories import add_runs
    from leaderboard.tests.matrix_bundles import MODEL, standard_matrix
    from runs.models import Run

    add_runs(*standard_matrix())
    hw = Run.objects.filter(stack__model_id=MODEL).first().hardware_class
    return reverse("leaderboard:matrix", kwargs={"hw": hw.slug, "model_id": MODEL})


def test_matrix_page_desktop_and_phone_without_javascript(live_server, browser, tmp_path) -> None:
    url = live_server.url + _matrix_url()
    SHOTS.mkdir(parents=True, exist_ok=True)
    for name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        context = browser.new_context(viewport=viewport, java_script_enabled=False)
        page = context.new_page()
        response = page.goto(url)
        assert response is not None and response.status == 200
        rows = page.locator("tr.matrix-row")
        assert rows.count() == 5
        assert rows.first.locator(".harness-name").inner_text() == "raw"
        assert "No clear winner." in page.locator("#best-harness + p").inner_text()
        aider = page.locator("tr.matrix-row", has_text="aider").locator("td.matrix-cell").first
        assert aider.is_visible()
        text = aider.inner_text()
        assert "80%" in text and "n = 5" in text and "×2.50" in text
        # The page itself never scrolls sideways; on a phone each harness is a card.
        assert page.evaluate(SIDEWAYS) <= 1
        if name == "phone":
            assert page.locator("table.matrix-table thead").is_hidden()
            box = rows.first.bounding_box()
            assert box is not None and box["width"] <= PHONE["width"]
            label = aider.evaluate("cell => getComputedStyle(cell, '::before').content")
            assert "Bug fixes" in label
        shot = tmp_path / f"matrix-{name}.png"
        page.screenshot(path=str(shot), full_page=True)
        shutil.copy(shot, SHOTS / shot.name)
        context.close()


def test_matrix_page_with_javascript_has_no_console_errors(live_server, browser) -> None:
    url = live_server.url + _matrix_url()
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(url)
    assert page.locator("tr.matrix-row").count() == 5
    assert errors == []
    # The JSON link is the API's answer for the same matrix (a bare JSON page: no favicon).
    page.get_by_role("link", name="JSON").click()
    assert '"best_harness"' in page.content()
    context.close()


def test_board_and_stack_page_lead_to_the_matrix_without_javascript(
    live_server, browser, tmp_path
) -> None:
    from runs.models import Stack

    url = _matrix_url()
    slug = url.split("/")[2]
    context = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{live_server.url}/leaderboard/?hw={slug}")
    page.locator("a.tag", has_text="harness matrix").first.click()
    page.wait_for_url(f"**{url}")
    assert page.locator("tr.matrix-row").count() == 5
    stack = Stack.objects.get(harness="aider")
    page.goto(f"{live_server.url}/stacks/{stack.id}/")
    line = page.locator("p.matrix-line")
    assert "no clear winner: aider (edit-format whole) leads" in line.inner_text()
    line.screenshot(path=str(tmp_path / "stack-line.png"))
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(tmp_path / "stack-line.png", SHOTS / "stack-line.png")
    line.get_by_role("link", name="See the matrix").click()
    page.wait_for_url(f"**{url}")
    context.close()
