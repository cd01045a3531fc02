"""The site in headless Chromium against a live server on demo data, with and without JS.

Screenshots of the main pages (desktop and phone, light and dark) go to bench/out/screenshots/.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

playwright_api = pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.browser
SCREENSHOTS = Path(__file__).resolve().parents[2] / "bench" / "out" / "screenshots"
FILTERED = re.compile(r"/leaderboard/\?vendor=nvidia&vram=24&engine=llama\.cpp&sort=decode$")
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module", autouse=True)
def _sync_code_beside_an_event_loop() -> Iterator[None]:
    """Playwright's sync API runs an event loop in this thread, and Django refuses ORM calls
    from a thread with a running loop unless told the code is synchronous anyway. Set only
    while these tests run, so no other test (or subprocess) inherits it."""
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if previous is None:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with playwright_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--no-sandbox", "--disable-background-networking"],
        )
        yield chromium
        chromium.close()


def _rows(page) -> list[dict]:
    rows = []
    for row in page.locator("#results table.board tbody tr").all():
        rows.append(
            {
                "model": row.locator("a.model-id").inner_text(),
                "engine": row.locator("td.col-engine").inner_text(),
                "hardware": row.locator("td.col-hardware").inner_text(),
                "decode": float(row.locator(".col-decode").inner_text().replace(",", "")),
            }
        )
    return rows


def _check_filtered_rows(rows: list[dict]) -> None:
    assert len(rows) >= 2
    for row in rows:
        assert row["engine"].startswith("llama.cpp")
        assert "24 GB" in row["hardware"] and "RX 7900" not in row["hardware"]
    speeds = [row["decode"] for row in rows]
    assert speeds == sorted(speeds, reverse=True)


def _download_csv(page, tmp_path: Path) -> list[dict]:
    with page.expect_download() as info:
        page.get_by_role("link", name="CSV", exact=True).click()
    target = tmp_path / "view.csv"
    info.value.save_as(target)
    with target.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _compare_two(page) -> None:
    boxes = page.locator("#results tbody input[type=checkbox]")
    boxes.nth(0).check()
    boxes.nth(1).check()
    page.get_by_role("button", name="Compare selected stacks").click()
    page.wait_for_url(re.compile(r"/compare/\?stacks=\d+,\d+&vendor=nvidia&vram=24$"))
    overall = page.locator("table.compare-table tr", has_text="Overall").first
    assert re.search(r"[+−±]\d", overall.locator(".delta").inner_text())
    assert page.locator(".verdict").count() == 1
    assert re.search(
        r"(exceeds|within) the noise|not enough", page.locator(".verdict").inner_text()
    )


def test_filter_sort_reload_stack_compare_and_csv_with_javascript(
    live_server, demo, browser, tmp_path
) -> None:
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(f"{live_server.url}/leaderboard/")
    assert page.locator("#results tbody tr").count() == 50
    page.select_option("#f-vendor", "nvidia")
    page.wait_for_url(re.compile(r"vendor=nvidia"))
    page.select_option("#f-vram", "24")
    page.wait_for_url(re.compile(r"vram=24"))
    page.select_option("#f-engine", "llama.cpp")
    page.wait_for_url(re.compile(r"engine=llama\.cpp"))
    page.locator("#results th a", has_text="Decode tok/s").click()
    page.wait_for_url(FILTERED)
    rows = _rows(page)
    _check_filtered_rows(rows)
    assert page.locator("#f-engine").input_value() == "llama.cpp"
    # The sort came from a header link; the form must still carry it on its next change.
    page.get_by_text("Median run", exact=True).click()
    page.wait_for_url(re.compile(r"mode=median&.*sort=decode"))
    page.get_by_text("Best run", exact=True).click()
    page.wait_for_url(FILTERED)

    page.reload()
    assert _rows(page) == rows
    assert page.locator("#f-vram").input_value() == "24"

    csv_rows = _download_csv(page, tmp_path)
    assert [r["model"] for r in csv_rows] == [r["model"] for r in rows]
    assert {r["engine"] for r in csv_rows} == {"llama.cpp"}

    page.locator("#results a.model-id").first.click()
    page.wait_for_url(re.compile(r"/stacks/\d+/$"))
    assert rows[0]["model"] in page.locator("h1").inner_text()
    assert page.locator("svg.strip").count() >= 1

    page.go_back()
    page.wait_for_url(FILTERED)
    _compare_two(page)
    context.close()


def test_the_same_flow_without_javascript(live_server, demo, browser, tmp_path) -> None:
    context = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{live_server.url}/leaderboard/")
    page.select_option("#f-vendor", "nvidia")
    page.select_option("#f-vram", "24")
    page.select_option("#f-engine", "llama.cpp")
    page.get_by_role("button", name="Apply filters").click()
    page.wait_for_url(re.compile(r"/leaderboard/\?vendor=nvidia&vram=24&engine=llama\.cpp$"))
    page.locator("#results th a", has_text="Decode tok/s").click()
    page.wait_for_url(FILTERED)
    rows = _rows(page)
    _check_filtered_rows(rows)

    page.reload()
    assert _rows(page) == rows

    csv_rows = _download_csv(page, tmp_path)
    assert [r["model"] for r in csv_rows] == [r["model"] for r in rows]

    page.locator("#results a.model-id").first.click()
    page.wait_for_url(re.compile(r"/stacks/\d+/$"))
    assert rows[0]["model"] in page.locator("h1").inner_text()

    page.go_back()
    _compare_two(page)
    context.close()


def test_screenshots_of_the_main_pages(live_server, demo, browser) -> None:
    from runs.models import Stack

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    from runs.models import Run

    busiest = list(
        Stack.objects.filter(best_run__score_scale="v3")
        .order_by("-published_run_count", "id")
        .values_list("id", flat=True)[:2]
    )
    stack_id, other_id = busiest
    # The run page is about receipts, so show the fixture run that has tasks and trials.
    run_id = Run.objects.filter(suite_results__tasks__samples__isnull=False).values("id")[0]["id"]
    pages = {
        "landing": "/",
        "leaderboard": "/leaderboard/",
        "stack": f"/stacks/{stack_id}/",
        "compare": f"/compare/?stacks={stack_id},{other_id}",
        "run": f"/runs/{run_id}/",
    }
    for scheme in ("light", "dark"):
        for device, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            context = browser.new_context(
                viewport=viewport, color_scheme=scheme, is_mobile=device == "phone"
            )
            page = context.new_page()
            for name, path in pages.items():
                response = page.goto(f"{live_server.url}{path}")
                assert response.status == 200, path
                # Nothing may overflow the viewport sideways except inside a scroll box.
                overflow = page.evaluate(
                    "document.documentElement.scrollWidth - document.documentElement.clientWidth"
                )
                assert overflow <= 1, f"{name} {device} overflows by {overflow}px"
                page.screenshot(path=SCREENSHOTS / f"{name}-{device}-{scheme}.png", full_page=True)
            context.close()
