"""Issue 32: a stack page's recipe, from a real bundle of the real llama.cpp server (xllamacpp):
it names the model file the bundle recorded beside the weights digest, and says the server
reported no build instead of "b0-unknown"."""

from __future__ import annotations

import copy
import re

import pytest
from django.test import Client

from runs.importers import parse_run_payload
from runs.tests.test_unscored_speed import speed_bundle  # noqa: F401
from submissions.intake import import_records
from worker.rules.engines import known_build

pytestmark = [pytest.mark.llm, pytest.mark.django_db]
playwright_api = pytest.importorskip("playwright.sync_api")

from leaderboard.tests.test_browser import (  # noqa: E402
    _sync_code_beside_an_event_loop,  # noqa: F401
    browser,  # noqa: F401
)
from leaderboard.tests.test_browser_rough_pages import _shot  # noqa: E402


def _recipe(html: str) -> dict[str, str]:
    start = html.index('<section class="recipe" id="recipe">')
    section = html[start : html.index("</section>", start)]
    pairs = re.findall(r"<dt>(.*?)</dt>\s*<dd[^>]*>(.*?)</dd>", section, re.S)
    text = {name: re.sub(r"<[^>]+>", " ", value) for name, value in pairs}
    return {name: " ".join(value.split()) for name, value in text.items()}


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_recipe_names_the_model_file_and_the_build_the_server_reported(
    speed_bundle,  # noqa: F811
    client: Client,
    live_server,
    browser,  # noqa: F811
) -> None:
    # xllamacpp's wheel is built without git metadata: /props says "b0-unknown", no /version.
    assert speed_bundle["engine"]["version"] == ""
    model_file = speed_bundle["model"]["file"]
    assert model_file.endswith(".gguf") and speed_bundle["model"]["sha256"]
    (run,) = import_records([parse_run_payload(copy.deepcopy(speed_bundle))]).created
    recipe = _recipe(client.get(f"/stacks/{run.stack_id}/").content.decode())
    assert recipe["Weights digest"] == f"sha256:{speed_bundle['model']['sha256']}"
    assert recipe["Model file"] == model_file
    assert recipe["Engine build"] == "llama.cpp (build not reported by the server)"
    for viewport in ({"width": 1280, "height": 800}, {"width": 390, "height": 844}):
        context = browser.new_context(viewport=viewport, is_mobile=viewport["width"] < 500)
        page = context.new_page()
        page.goto(f"{live_server.url}/stacks/{run.stack_id}/#recipe")
        section = page.locator("#recipe")
        assert model_file in section.inner_text()
        section.scroll_into_view_if_needed()
        _shot(page, f"stack_recipe_{viewport['width']}", clip=section.bounding_box())
        context.close()


@pytest.mark.parametrize(
    ("reported", "shown"),
    [("b0-unknown", ""), ("unknown", ""), ("", ""), ("b6512-3f1a2b9c", "b6512-3f1a2b9c")],
)
def test_a_build_that_names_nothing_is_no_build(reported: str, shown: str) -> None:
    assert known_build(reported) == shown
