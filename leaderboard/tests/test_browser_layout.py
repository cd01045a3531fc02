"""Every main page at 390, 1280, 1366 and 1920 px, light and dark, in headless Chromium on demo
data (issue 18, visitors): the page never scrolls sideways, the board's trust column
("Evidence": verified or self-reported) is on screen or inside a box that scrolls sideways,
no table scrolls in a box of its own height, and on a phone the board's rows are cards with the
numbers that matter.

Full-page screenshots go to bench/out/screenshots/layout/ (ignored; CI keeps them as artifacts).
"""

from __future__ import annotations

import pytest

playwright_api = pytest.importorskip("playwright.sync_api")

from leaderboard.tests.test_browser import (  # noqa: E402
    SCREENSHOTS,
    _sync_code_beside_an_event_loop,  # noqa: F401
    browser,  # noqa: F401
)

pytestmark = pytest.mark.browser
SHOTS = SCREENSHOTS / "layout"
WIDTHS = (390, 1280, 1366, 1920)
# At 1280 px and up these fit the width, trust column included, without scrolling sideways.
BOARDS = ("leaderboard", "hardware", "submitter")

# For each table that holds a trust column: where its cells are, against the viewport and
# against the nearest ancestor that scrolls sideways.
TRUST = """() => Array.from(document.querySelectorAll('.col-trust')).slice(0, 12).map(cell => {
  const r = cell.getBoundingClientRect();
  let box = cell.parentElement, scroller = null, edge = window.innerWidth;
  while (box && box !== document.body) {
    const style = getComputedStyle(box);
    if (style.overflowX !== 'visible') edge = Math.min(edge, box.getBoundingClientRect().right);
    if (!scroller && ['auto', 'scroll'].includes(style.overflowX)
        && box.scrollWidth > box.clientWidth) scroller = box;
    box = box.parentElement;
  }
  return {right: r.right, width: r.width, visible: cell.offsetParent !== null,
          onScreen: r.right <= edge + 1, scroller: scroller ? scroller.className : null};
})"""
# Boxes that scroll up and down on their own (the page must scroll once).
INNER_SCROLL = """() => Array.from(document.querySelectorAll('main *')).filter(el => {
  const style = getComputedStyle(el);
  return ['auto', 'scroll'].includes(style.overflowY) && el.scrollHeight > el.clientHeight + 2
    && el.tagName !== 'TEXTAREA' && !el.classList.contains('code')
    && !el.classList.contains('output');
}).map(el => el.tagName + '.' + el.className)"""
# Tables cut off by a box that hides its overflow.
CLIPPED = """() => Array.from(document.querySelectorAll('main table')).filter(table => {
  let box = table.parentElement;
  while (box && box !== document.body) {
    const style = getComputedStyle(box);
    if (style.overflowX === 'hidden' || style.overflowX === 'clip') {
      return table.getBoundingClientRect().right > box.getBoundingClientRect().right + 1;
    }
    box = box.parentElement;
  }
  return false;
}).map(t => t.className)"""


# Tables that must fit their box at every width, phones included.
FITS = """() => Array.from(document.querySelectorAll('table.speed-table')).filter(
  table => table.scrollWidth > table.parentElement.clientWidth + 1).map(t => t.className)"""


def _pages() -> dict[str, str]:
    from django.urls import reverse

    from runs.models import Hardware, Run, Stack

    busiest = list(
        Stack.objects.filter(best_run__score_scale="v3")
        .order_by("-published_run_count", "id")
        .values_list("id", flat=True)[:2]
    )
    stack = Stack.objects.get(pk=busiest[0])
    run_id = Run.objects.filter(suite_results__tasks__samples__isnull=False).values("id")[0]["id"]
    hardware = Hardware.objects.filter(runs__isnull=False).order_by("id").first()
    submitter = Run.objects.filter(submission__submitter_name__gt="").first().submission
    return {
        "landing": "/",
        "leaderboard": "/leaderboard/",
        "leaderboard-4090": "/leaderboard/?hw=rtx-4090-24gb",
        "leaderboard-all-hardware": "/leaderboard/?hw=all",
        "leaderboard-24gb": "/leaderboard/?vram=24",
        "leaderboard-legacy": "/leaderboard/?hw=all&scale=v2",
        "hardware": f"/hardware/{hardware.id}/",
        "submitter": submitter.submitter_url,
        "stack": f"/stacks/{busiest[0]}/",
        "model": reverse("leaderboard:model", args=[stack.model_id]),
        "compare": f"/compare/?stacks={busiest[0]},{busiest[1]}",
        "run": f"/runs/{run_id}/",
        "methodology": "/methodology/",
        "data": "/data/",
        "signup": "/account/signup/",
        "login": "/account/login/",
    }


def _check(page, name: str, width: int) -> list[str]:
    problems = []
    overflow = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
    if overflow > 0:
        problems.append(f"{name}@{width}: the page scrolls sideways by {overflow}px")
    for cell in page.evaluate(TRUST):
        if not cell["visible"] or cell["width"] == 0:
            problems.append(f"{name}@{width}: a trust cell is hidden")
        elif not cell["onScreen"] and not cell["scroller"]:
            problems.append(f"{name}@{width}: a trust cell is cut off at {cell['right']:.0f}px")
        elif not cell["onScreen"] and width >= 1280 and name.startswith(BOARDS):
            problems.append(f"{name}@{width}: the trust column is off screen")
    for box in page.evaluate(INNER_SCROLL):
        problems.append(f"{name}@{width}: {box} scrolls on its own")
    for table in page.evaluate(FITS):
        problems.append(f"{name}@{width}: {table} is wider than its box")
    for table in page.evaluate(CLIPPED):
        problems.append(f"{name}@{width}: table {table} is clipped")
    return problems


def test_every_page_at_every_width_in_both_themes(live_server, demo, browser) -> None:  # noqa: F811
    SHOTS.mkdir(parents=True, exist_ok=True)
    pages = _pages()
    problems: list[str] = []
    for scheme in ("light", "dark"):
        for width in WIDTHS:
            phone = width < 500
            context = browser.new_context(
                viewport={"width": width, "height": 844 if phone else 900},
                color_scheme=scheme,
                is_mobile=phone,
            )
            page = context.new_page()
            for name, path in pages.items():
                response = page.goto(f"{live_server.url}{path}")
                if response.status != 200:
                    problems.append(f"{name}@{width}: {path} answered {response.status}")
                    continue
                problems += _check(page, name, width)
                page.screenshot(path=SHOTS / f"{name}-{width}-{scheme}.png", full_page=True)
            context.close()
    assert not problems, "\n".join(problems)


def signed_in(browser, live_server, user, **options):  # noqa: F811
    """A browser context with `user`'s session cookie."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    context = browser.new_context(**options)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}]
    )
    return context


def owner_pages(alice_key, envelope) -> dict[str, str]:
    """A submitter's pages: Your runs with a pending upload, and that run's own page."""
    from django.test import Client

    from submissions.tests.conftest import post_json

    run_id = post_json(Client(), "/api/v1/runs", envelope, alice_key).json()["id"]
    return {"your-runs": "/account/runs/", "pending-run": f"/runs/{run_id}/"}


def test_a_submitters_pages_at_every_width(
    live_server,
    browser,  # noqa: F811
    alice,
    alice_key,
    envelope,
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    pages = owner_pages(alice_key, envelope)
    problems: list[str] = []
    for scheme in ("light", "dark"):
        for width in WIDTHS:
            context = signed_in(
                browser,
                live_server,
                alice,
                viewport={"width": width, "height": 900},
                color_scheme=scheme,
            )
            page = context.new_page()
            for name, path in pages.items():
                assert page.goto(f"{live_server.url}{path}").status == 200, path
                problems += _check(page, name, width)
                page.screenshot(path=SHOTS / f"{name}-{width}-{scheme}.png", full_page=True)
            context.close()
    assert not problems, "\n".join(problems)


def test_the_filters_fold_away_without_javascript(live_server, demo, browser) -> None:  # noqa: F811
    # Folded at every width, so the first rows show without scrolling (issue 29).
    for width in (390, 1280):
        context = browser.new_context(
            viewport={"width": width, "height": 844}, java_script_enabled=False
        )
        page = context.new_page()
        page.goto(f"{live_server.url}/leaderboard/")
        assert page.locator("#f-hw").is_visible()  # the hardware choice is never folded
        assert not page.locator("#f-engine").is_visible(), width
        page.locator(".filter-fold > summary").click()
        page.select_option("#f-engine", "llama.cpp")
        page.get_by_role("button", name="Apply filters").click()
        page.wait_for_url("**/leaderboard/?*engine=llama.cpp*")
        assert page.locator("#results .board-cards tbody tr").count() >= 1
        assert page.locator("#f-engine").is_visible()  # open: the visitor chose inside it
        context.close()
