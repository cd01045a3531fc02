"""Issue 32, the pages, in headless Chromium at 1280×800 and 390×844: the compare legend is
a paragraph, the submitter's runs table fits at 1280 and 1366 px, and the charts have a padded
axis, named dots and readable labels on a phone.

The screenshots looked at for the issue go to bench/out/screenshots/i32/.
"""

from __future__ import annotations

import pytest

playwright_api = pytest.importorskip("playwright.sync_api")

from leaderboard.tests.test_browser import (  # noqa: E402
    SCREENSHOTS,
    _sync_code_beside_an_event_loop,  # noqa: F401
    browser,  # noqa: F401
)
from leaderboard.tests.test_browser_lanes import stacks  # noqa: E402, F401

pytestmark = pytest.mark.browser
WIDE = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
SHOTS = SCREENSHOTS / "i32"


def _shot(page, name: str, **options) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / f"i32_{name}.png", **options)


def _context(browser, viewport: dict):  # noqa: F811
    return browser.new_context(viewport=viewport, is_mobile=viewport["width"] < 500)


def test_the_compare_legend_is_one_paragraph(live_server, stacks, browser) -> None:  # noqa: F811
    for viewport in (WIDE, PHONE):
        context = _context(browser, viewport)
        page = context.new_page()
        page.goto(f"{live_server.url}/compare/?stacks={stacks['raw']},{stacks['agent']}")
        legend = page.locator("#decode-legend")
        # A flex box would lay its text and each <em> and <a> out as separate ragged items.
        assert legend.evaluate("el => getComputedStyle(el).display") == "block"
        assert legend.evaluate("el => el.tagName") == "P"
        if viewport is WIDE:
            legend.scroll_into_view_if_needed()
            _shot(page, "compare_legend", clip=legend.bounding_box())
        context.close()


TABLE_FIT = """() => {
  const wrap = document.querySelector('#results .table-wrap');
  const table = wrap.querySelector('table');
  const last = table.querySelector('thead th:last-child').getBoundingClientRect();
  return {table: table.scrollWidth, box: wrap.clientWidth, lastRight: last.right,
          viewport: window.innerWidth};
}"""


def test_the_submitters_runs_table_fits_at_1280_and_1366(live_server, demo, browser) -> None:  # noqa: F811
    from django.db.models import Count

    from submissions.models import Submission

    # The demo's busiest submitter (its runs carry a submitter's name, as imported ones do).
    busiest = (
        Submission.objects.filter(run__published=True)
        .exclude(submitter_name="")
        .values("submitter_name")
        .annotate(n=Count("id"))
        .order_by("-n")
        .first()
    )
    path = Submission.objects.filter(submitter_name=busiest["submitter_name"]).first().submitter_url
    for width in (1280, 1366):
        context = _context(browser, {"width": width, "height": 800})
        page = context.new_page()
        assert page.goto(f"{live_server.url}{path}").status == 200
        fit = page.evaluate(TABLE_FIT)
        assert fit["table"] <= fit["box"] + 1, f"at {width}px the table is {fit}"
        assert fit["lastRight"] <= fit["viewport"], f"at {width}px a column is off screen: {fit}"
        if width == 1280:
            _shot(page, "submitter_1280", full_page=True)
        context.close()


QUANTS = (
    "Q2_K",
    "Q3_K_S",
    "Q3_K_M",
    "Q4_0",
    "Q4_K_S",
    "Q4_K_M",
    "Q5_0",
    "Q5_K_S",
    "Q5_K_M",
    "Q6_K",
)


@pytest.fixture
def one_run(transactional_db) -> int:
    """A stack with a single run on one class: 80 tok/s."""
    from leaderboard.tests.lane_factories import class_record, on_class

    (run,) = on_class("rtx-4090", class_record("rtx-4090", model_id="gemma3:4b", decode=80))
    return run.stack_id


@pytest.fixture
def twenty_stacks(transactional_db) -> str:
    """Twenty stacks of one model (ten quantizations on two engines), one run each."""
    from leaderboard.tests.lane_factories import class_record, on_class

    records = [
        class_record(
            "rtx-4090",
            model_id="qwen3:14b",
            quantization=quant,
            engine=engine,
            decode=20 + 9 * n + 3 * e,
            quality=30 + ((n * 7 + e * 11) % 50),
        )
        for e, engine in enumerate(("llama.cpp", "ollama"))
        for n, quant in enumerate(QUANTS)
    ]
    on_class("rtx-4090", *records)
    return "qwen3:14b"


TICKS = """sel => Array.from(document.querySelector(sel).querySelectorAll('.axis-labels text'))
  .filter(t => !t.classList.contains('axis-title')).map(t => t.textContent.trim())"""


def test_a_one_run_chart_has_a_padded_axis(live_server, browser, one_run) -> None:  # noqa: F811
    for viewport in (WIDE, PHONE):
        context = _context(browser, viewport)
        page = context.new_page()
        assert page.goto(f"{live_server.url}/stacks/{one_run}/").status == 200
        chart = page.locator("figure.chart", has=page.locator("svg.strip")).first
        labels = [float(t) for t in page.evaluate(TICKS, "figure.chart svg.strip") if t]
        assert min(labels) < 80 < max(labels) and max(labels) - min(labels) >= 6, labels
        # Readable on a phone: tick labels at least 11 px tall on screen.
        size = chart.locator(".axis-labels text").first.evaluate(
            "t => t.getBoundingClientRect().height"
        )
        assert size >= 11, f"tick labels are {size:.1f}px tall at {viewport['width']}px"
        chart.scroll_into_view_if_needed()
        _shot(page, f"chart_one_run_{viewport['width']}", clip=chart.bounding_box())
        context.close()


def test_the_scatter_names_its_dots_and_labels_the_front(
    live_server,
    browser,  # noqa: F811
    twenty_stacks,
) -> None:
    for viewport in (WIDE, PHONE):
        context = _context(browser, viewport)
        page = context.new_page()
        assert page.goto(f"{live_server.url}/models/{twenty_stacks}/").status == 200
        chart = page.locator("figure.chart", has=page.locator("svg.scatter")).first
        links = chart.locator("svg.scatter .points a")
        assert links.count() == 20
        # The front's names are drawn where they clear each other; every other dot's only on
        # hover or focus.
        size = "wide" if viewport is WIDE else "narrow"
        front = chart.locator(f"svg.scatter .pt-name.{size}")
        assert front.count() >= 1
        for index in range(front.count()):
            assert front.nth(index).is_visible() and front.nth(index).text_content()
        plain = chart.locator("svg.scatter a:not(:has(circle.front))").first
        name = plain.locator(".pt-name")
        assert not name.is_visible()
        assert plain.locator("title").text_content().startswith("qwen3:14b")
        plain.focus()
        assert name.is_visible() and name.text_content().startswith("qwen3:14b")
        page.keyboard.press("Tab")  # focus moves on, the name hides again
        assert not name.is_visible()
        if viewport is WIDE:
            plain.hover()
            assert name.is_visible()
        chart.scroll_into_view_if_needed()
        size = chart.locator(".axis-labels text").first.evaluate(
            "t => t.getBoundingClientRect().height"
        )
        assert size >= 11, f"tick labels are {size:.1f}px tall at {viewport['width']}px"
        _shot(page, f"chart_twenty_{viewport['width']}", clip=chart.bounding_box())
        context.close()


def test_the_api_docs_link_back_and_break_no_csp_rule(live_server, browser, db) -> None:  # noqa: F811
    context = _context(browser, WIDE)
    page = context.new_page()
    problems: list[str] = []
    page.on(
        "console",
        lambda message: problems.append(message.text) if message.type == "error" else None,
    )
    page.on("pageerror", lambda error: problems.append(str(error)))
    assert page.goto(f"{live_server.url}/api/v1/docs/").status == 200
    page.locator(".swagger-ui .information-container").wait_for(timeout=30_000)
    page.wait_for_load_state("networkidle")
    assert problems == [], problems
    back = page.get_by_role("link", name="← BenchLoop")
    assert back.get_attribute("href") == "/"
    back.click()
    page.wait_for_url(f"{live_server.url}/")
    context.close()


# The longest a quantization and an engine build get in the real imported data.
LONG_QUANT = "COMPRESSED-TENSORS (NVFP4+FP8)"
LONG_BUILD = "Lucebox-Hub dflash 79fe738 (Luce-Org/llama.cpp@luce-dflash fork)"


def test_the_board_fits_1280_with_the_longest_names_real_rows_carry(
    live_server,
    transactional_db,
    browser,  # noqa: F811
) -> None:
    """Kept on one line, they widened the board past a 1280 px screen (1,650 px on the real
    data's RTX 5090 board): the figures and the trust column went off its edge."""
    from leaderboard.tests.lane_factories import class_record, on_class

    on_class(
        "rtx-4090",
        *(
            class_record(
                "rtx-4090",
                model_id=f"acme/m{i}-8b",
                quantization=LONG_QUANT,
                engine_version=LONG_BUILD,
                decode=50.0 + i,
            )
            for i in range(3)
        ),
    )
    context = _context(browser, WIDE)
    page = context.new_page()
    assert page.goto(f"{live_server.url}/leaderboard/?hw=rtx-4090").status == 200
    assert page.locator("#results td.col-engine", has_text=LONG_BUILD).count() == 3
    fit = page.evaluate(TABLE_FIT)
    assert fit["table"] <= fit["box"] + 1, fit
    assert fit["lastRight"] <= fit["viewport"], fit
    _shot(page, "board_long_names")
    context.close()
