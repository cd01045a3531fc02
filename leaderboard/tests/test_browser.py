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
FILTERED = re.compile(r"/leaderboard/\?vram=24&engine=llama\.cpp&sort=decode$")
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
    for row in page.locator("#results table.board tbody tr:not(.class-section)").all():
        rows.append(
            {
                "model": row.locator("a.model-id").inner_text(),
                "stack": row.locator("a.model-id").get_attribute("href").split("/")[2],
                "engine": row.locator("td.col-engine").inner_text(),
                "hardware": row.locator("td.col-hardware").inner_text(),
                "decode": float(row.locator(".col-decode .fig").inner_text().replace(",", "")),
            }
        )
    return rows


def _check_filtered_rows(rows: list[dict]) -> None:
    assert len(rows) >= 2
    for row in rows:
        assert row["engine"].startswith("llama.cpp")
        assert row["hardware"].endswith(" 24 GB") and not row["hardware"].startswith("CPU")
    # Several classes: each class's rows together, fastest first within it (issue 29).
    classes = [row["hardware"] for row in rows]
    assert classes == sorted(classes, key=classes.index)
    for label in set(classes):
        speeds = [row["decode"] for row in rows if row["hardware"] == label]
        assert speeds == sorted(speeds, reverse=True)


def _download_csv(page, tmp_path: Path) -> list[dict]:
    with page.expect_download() as info:
        page.get_by_role("link", name="CSV", exact=True).click()
    target = tmp_path / "view.csv"
    info.value.save_as(target)
    with target.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _compare_two(page) -> None:
    # Two rows of different stacks (one stack can have a row on each 24 GB card).
    boxes = page.locator("#results tbody input[type=checkbox]")
    values = [boxes.nth(i).get_attribute("value") for i in range(boxes.count())]
    second = next(i for i, v in enumerate(values) if v != values[0])
    boxes.nth(0).check()
    boxes.nth(second).check()
    page.get_by_role("button", name="Compare selected stacks").click()
    page.wait_for_url(re.compile(r"/compare/\?stacks=\d+,\d+&vram=24$"))
    labels = page.locator(".compare-head .stack-label").all_inner_texts()
    assert len(labels) == 2 and len(set(labels)) == 2
    # Speeds are compared on one hardware class the two share (issue 15), or not at all.
    heading = page.locator("#class-title").inner_text()
    if heading == "No hardware class in common":
        assert page.locator(".verdict").count() == 0
        return
    assert heading.startswith("On ")
    decode = page.locator("table.compare-table tr", has_text="Decode tok/s").first.inner_text()
    assert re.search(r"[+−±]\d", decode) or "n too small" in decode
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
    assert len({row["hardware"] for row in _rows(page)}) == 1  # the default class alone
    page.select_option("#f-hw", "vram:24")
    page.wait_for_url(re.compile(r"\?vram=24$"))
    page.locator(".filter-fold > summary").click()  # the filters fold away (issue 29)
    page.select_option("#f-engine", "llama.cpp")
    page.wait_for_url(re.compile(r"engine=llama\.cpp"))
    page.locator("#results th a", has_text="Decode tok/s").click()
    page.wait_for_url(FILTERED)
    rows = _rows(page)
    _check_filtered_rows(rows)
    assert page.locator("#f-engine").input_value() == "llama.cpp"
    # The sort came from a header link; the form must still carry it on its next change.
    page.get_by_text("Speed only", exact=True).click()
    page.wait_for_url(re.compile(r"scale=speed&.*sort=decode"))
    page.get_by_text("Ranked v3", exact=True).click()
    page.wait_for_url(FILTERED)

    page.reload()
    assert _rows(page) == rows
    assert page.locator("#f-hw").input_value() == "vram:24"

    csv_rows = _download_csv(page, tmp_path)
    assert [r["model"] for r in csv_rows] == [r["model"] for r in rows]
    assert {r["engine"] for r in csv_rows} == {"llama.cpp"}

    page.locator("#results a.model-id").first.click()
    page.wait_for_url(re.compile(r"/stacks/\d+/\?hw=[a-z0-9.-]+$"))
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
    page.select_option("#f-hw", "vram:24")
    page.locator(".filter-fold > summary").click()  # the filters fold away (issue 29)
    page.select_option("#f-engine", "llama.cpp")
    page.get_by_role("button", name="Apply filters").click()
    page.wait_for_url(re.compile(r"/leaderboard/\?vram=24&engine=llama\.cpp$"))
    page.locator("#results th a", has_text="Decode tok/s").click()
    page.wait_for_url(FILTERED)
    rows = _rows(page)
    _check_filtered_rows(rows)

    page.reload()
    assert _rows(page) == rows

    csv_rows = _download_csv(page, tmp_path)
    assert [r["model"] for r in csv_rows] == [r["model"] for r in rows]

    page.locator("#results a.model-id").first.click()
    page.wait_for_url(re.compile(r"/stacks/\d+/\?hw=[a-z0-9.-]+$"))
    assert rows[0]["model"] in page.locator("h1").inner_text()

    page.go_back()
    _compare_two(page)
    context.close()


def _only_4090_speeds(page) -> None:
    """Every row is a lane on the RTX 4090 with that lane's own median, and nothing on the
    page names another class's speed."""
    from runs.models import Lane

    rows = _rows(page)
    assert len(rows) >= 2
    assert {row["hardware"] for row in rows} == {"RTX 4090 24 GB"}
    lanes = Lane.objects.filter(hardware_class__slug="rtx-4090-24gb", score_scale="v3")
    for row in rows:
        stored = lanes.select_related("best_run").get(
            stack_id=row["stack"], benchmark_version="3.1.0"
        )
        expected = stored.decode_median or stored.best_run.decode_tps
        assert row["decode"] == float(f"{expected:,.1f}".replace(",", "")), row
    results = page.locator("#results").inner_text()
    assert "On RTX 4090 24 GB" in results
    for other in ("H100", "RTX 3090", "RTX 5090", "M2 Max", "CPU only"):
        assert other not in results
    assert page.locator("#results svg.scatter").count() == 1  # one class: its own chart


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_a_visitor_picks_rtx_4090_on_the_landing_page(
    live_server, demo, browser, javascript: bool
) -> None:
    context = browser.new_context(viewport=PHONE, java_script_enabled=javascript, is_mobile=True)
    page = context.new_page()
    page.goto(f"{live_server.url}/")
    page.select_option("#landing-hw", label="RTX 4090 24 GB")
    page.get_by_role("button", name="Show stacks on it").click()
    page.wait_for_url(re.compile(r"/leaderboard/\?hw=rtx-4090-24gb$"))
    _only_4090_speeds(page)
    assert page.locator("#f-hw").input_value() == "rtx-4090-24gb"
    if javascript:
        # The menu updates the results in place and the address bar with it.
        page.select_option("#f-hw", "all")
        page.wait_for_url(re.compile(r"/leaderboard/\?hw=all$"))
    else:
        page.select_option("#f-hw", "all")
        # The hardware's own button: the other filters, and their button, are folded away.
        page.get_by_role("button", name="Show", exact=True).click()
        page.wait_for_url(re.compile(r"/leaderboard/\?hw=all$"))
    assert "these rows mix machines" in page.locator(".mixed-banner").inner_text()
    assert page.locator("#results .col-decode").count() == 0
    assert page.locator("#results svg.scatter").count() == 0
    page.go_back()
    page.wait_for_url(re.compile(r"/leaderboard/\?hw=rtx-4090-24gb$"))
    _only_4090_speeds(page)
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
        "leaderboard-4090": "/leaderboard/?hw=rtx-4090-24gb",
        "leaderboard-all-hardware": "/leaderboard/?hw=all",
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
