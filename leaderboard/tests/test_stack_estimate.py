"""The stack page for a hardware class the stack has no run on (issue 29): its estimate, marked
"estimated, not measured", with the arithmetic one click away and the call to measure it; never
in the measured lanes' table. Real accelerator classes, so the ceilings come from the real data.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from leaderboard import estimated
from leaderboard.templatetags.estimate_tags import bounded, rough
from leaderboard.tests.lane_factories import class_record, on_class
from runs.models import HardwareClass, Run, Stack

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> dict[str, Stack]:
    """Ten 8B stacks and a 70B one on an H100; the first 8B stack and four others on an RTX
    4090 too (as the board's estimate tests build it)."""
    for i in range(10):
        on_class("h100", class_record("h100", model_id=f"acme/m{i}-8b", decode=90.0 + 3 * i))
    on_class("h100", class_record("h100", model_id="acme/big-70b", quantization="Q8_0", decode=20))
    on_class("rtx-4090", class_record("rtx-4090", model_id="acme/m0-8b", decode=60.0))
    for i in range(4):
        on_class("rtx-4090", class_record("rtx-4090", model_id=f"acme/r{i}-8b", decode=55.0 + i))
    return {stack.model_id: stack for stack in Stack.objects.all()}


def _stack_page(client, stack: Stack, hw: str) -> str:
    query = f"?hw={hw}" if hw else ""
    response = client.get(f"{reverse('leaderboard:stack', args=[stack.pk])}{query}")
    assert response.status_code == 200
    return response.content.decode()


def _section(html: str) -> str:
    start = html.index('id="estimated"')
    return html[start : html.index("</section>", start)]


def test_an_unmeasured_class_shows_the_estimate_apart_from_the_measured_table(client, world):
    stack = world["acme/m4-8b"]  # measured on the H100 only
    html = _stack_page(client, stack, "rtx-4090")
    section = _section(html)
    found = estimated.estimate(stack, HardwareClass.objects.get(slug="rtx-4090"))
    assert found is not None and found.decode is not None and found.prefill is not None
    assert "On RTX 4090 24 GB: estimated, not measured" in section
    assert "estimated, not measured" in section
    # Decode and prefill, each with the 80% interval the estimate computed.
    figures = re.findall(
        r"<dd><strong>([^<]+)</strong> tok/s <span class=\"ci\">80%: ([^<]+)<", section
    )
    assert bounded(found.decode) and bounded(found.prefill)
    assert figures == [
        (rough(e.value), f"{rough(e.low)}–{rough(e.high)}") for e in (found.decode, found.prefill)
    ]
    # The arithmetic one click away, and the command that measures it.
    assert reverse("leaderboard:estimate", args=[stack.pk, "rtx-4090"]) in section
    assert "benchloop run --url http://127.0.0.1:8080 --model acme/m4-8b --profile core" in section
    # Never in the measured lanes' table: the page has no lane row for the RTX 4090.
    table = html[: html.index('id="estimated"')]
    assert 'data-class="rtx-4090"' not in table
    assert 'data-class="h100"' not in table  # ?hw= keeps the page to the class asked for
    assert "nobody has published one on RTX 4090 24 GB" in table
    assert "Only runs matching <strong>RTX 4090 24 GB</strong>" in table
    # The picker names the class as not measured, so the choice stays visible.
    assert ">RTX 4090 24 GB (not measured)</option>" in html


def test_a_measured_class_has_no_estimate(client, world):
    html = _stack_page(client, world["acme/m0-8b"], "rtx-4090")
    assert 'id="estimated"' not in html
    assert 'data-class="rtx-4090"' in html
    # Every class side by side: nothing estimated either.
    assert 'id="estimated"' not in _stack_page(client, world["acme/m4-8b"], "")


def test_where_no_estimate_can_be_made_the_page_says_so_and_still_asks_for_a_run(client, world):
    section = _section(_stack_page(client, world["acme/big-70b"], "rtx-4090"))
    assert "no estimate can be made" in section
    assert "<strong>" not in section  # no figure at all
    assert (
        "benchloop run --url http://127.0.0.1:8080 --model acme/big-70b --profile core" in section
    )
    # No lab job offered: the lab has no verified run on this class.
    assert reverse("lab:new_job") not in section


def test_the_lab_is_offered_where_it_has_measured_the_class(client, world):
    Run.objects.filter(hardware_class__slug="rtx-4090").update(is_verified=True)
    section = _section(_stack_page(client, world["acme/m4-8b"], "rtx-4090"))
    assert reverse("lab:new_job") in section


def test_an_unknown_class_shows_nothing_estimated(client, world):
    html = _stack_page(client, world["acme/m4-8b"], "no-such-gpu")
    assert 'id="estimated"' not in html
