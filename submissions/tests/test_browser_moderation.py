"""A moderator in headless Chromium: opens a run from the queue, trusts its submitter and
decides in bulk, with JavaScript (htmx swaps the queue) and without it.

Screenshots of the queue at 1280 and 390 px go to bench/out/screenshots/moderation/, or to
$MODERATION_SCREENSHOTS when set.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import pytest
from django.test import Client

from leaderboard.tests.test_browser import (  # noqa: F401  (shared fixtures)
    _sync_code_beside_an_event_loop,
    browser,
)
from submissions import services
from submissions.models import Status, Submission, SubmitterProfile
from submissions.tests.conftest import post_json

playwright_api = pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.browser
SHOTS = Path(
    os.environ.get(
        "MODERATION_SCREENSHOTS",
        Path(__file__).resolve().parents[2] / "bench" / "out" / "screenshots" / "moderation",
    )
)
WIDE = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
PASSWORD = "moderating all day"  # bob's, in the root conftest


def _speed_run(base: dict, decode: float, *, index: int) -> dict:
    data = copy.deepcopy(base)
    data["run_id"] = f"browser-{index}-{decode}"
    data["timestamp"] = f"2026-11-{10 + index:02d}T10:00:00+00:00"
    data["model"] = {**data["model"], "model_id": "llama3.1:8b", "quantization": "Q4_K_M"}
    data["machine"] = {**data["machine"], "gpu": "NVIDIA GeForce RTX 4090", "gpu_count": 1}
    for task in data["suites"]["speed"]["tasks"]:
        for trial in task["metadata"]["trials"]:
            trial["speed_metrics"]["generation_tok_per_sec"] = decode
            trial["speed_metrics"]["ttft_ms"] = 13689.0 if index == 5 else 37.0
    return data


def _upload(data: dict, key: str) -> dict:
    response = post_json(Client(), "/api/v1/runs", data, key)
    assert response.status_code == 201, response.content
    return response.json()


@pytest.fixture
def queue_data(alice, alice_key, mallory, mallory_key, bob, smoke_run) -> dict:
    """mallory (trusted) has three approved peers; alice waits with a flagged run and two
    plausible ones, and has reported one of mallory's."""
    SubmitterProfile.objects.create(user=mallory, is_trusted=True)
    peers = [
        _upload(_speed_run(smoke_run, d, index=i), mallory_key)
        for i, d in enumerate([138.0, 140.0, 143.0])
    ]
    flagged = _upload(_speed_run(smoke_run, 900.0, index=4), alice_key)
    plausible = [
        _upload(_speed_run(smoke_run, d, index=5 + i), alice_key)
        for i, d in enumerate([145.0, 139.0])
    ]
    reported = Submission.objects.get(run_id=peers[0]["id"]).run
    services.report_run(run=reported, reporter=alice, reason="Looks <b>too</b> steady to me")
    return {"flagged": flagged["id"], "plausible": [p["id"] for p in plausible]}


def _sign_in(page, base: str) -> None:
    page.goto(f"{base}/account/login/?next=/moderation/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/moderation/$"))


def _no_page_overflow(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_a_moderator_opens_a_run_trusts_its_submitter_and_approves_in_bulk(
    live_server, browser, queue_data
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    first, second = queue_data["plausible"]
    context = browser.new_context(viewport=WIDE)
    page = context.new_page()
    _sign_in(page, live_server.url)

    # The queue's run names are links; the run page opens though the run is pending.
    page.locator(f"#run-{first} a").click()
    page.wait_for_url(re.compile(rf"/runs/{first}/$"))
    assert "llama3.1:8b" in page.locator("h1").inner_text()
    page.go_back()
    page.wait_for_url(re.compile(r"/moderation/$"))

    card = page.locator("li.mod-item", has=page.locator(f"#run-{queue_data['flagged']}"))
    evidence = card.locator(".mod-evidence").inner_text()
    assert "decode 900 tok/s > ceiling 207 tok/s = 1,008 GB/s ÷ 4.87 GB active weights" in evidence
    assert "the median of 3 approved peers on RTX 4090 24 GB" in evidence
    assert "13,689 ms" in page.locator(f"li.mod-item:has(#run-{first}) .mod-figures").inner_text()
    assert "Looks <b>too</b> steady to me" in page.locator("ul.reports").inner_text()
    for width, viewport in (("1280", WIDE), ("390", PHONE)):
        page.set_viewport_size(viewport)
        assert _no_page_overflow(page), f"the queue overflows at {width} px"
        page.screenshot(path=str(SHOTS / f"queue-{width}.png"), full_page=True)
    page.emulate_media(color_scheme="dark")
    page.screenshot(path=str(SHOTS / "queue-390-dark.png"), full_page=True)
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(WIDE)

    # Trust alice from her row: a confirmation page, then back to the queue with a message.
    card.get_by_role("link", name="Trust alice…").click()
    page.wait_for_url(re.compile(r"/moderation/submitters/\d+/trust/\?next="))
    page.screenshot(path=str(SHOTS / "trust-1280.png"), full_page=True)
    page.get_by_role("button", name="Trust alice").click()
    page.wait_for_url(re.compile(r"/moderation/$"))
    assert "alice is now trusted" in page.locator(".messages").inner_text()
    assert SubmitterProfile.objects.get(user__username="alice").is_trusted
    assert card.get_by_role("link", name="Stop trusting alice…").count() == 1
    page.get_by_role("link", name="Submitters and trust").click()
    page.wait_for_url(re.compile(r"/moderation/submitters/$"))
    for name in ("alice", "mallory"):
        link = page.get_by_role("link", name=re.compile(rf"^Stop trusting {name}\b"))
        assert link.count() == 1
    page.set_viewport_size(PHONE)
    assert _no_page_overflow(page)
    page.screenshot(path=str(SHOTS / "submitters-390.png"), full_page=True)
    page.set_viewport_size(WIDE)
    page.go_back()
    page.wait_for_url(re.compile(r"/moderation/$"))

    # Bulk approval with htmx: the queue is swapped in place, the page is not reloaded.
    page.evaluate("window.stillHere = true")
    for run_id in (first, second):
        page.locator(f"li.mod-item:has(#run-{run_id}) input[name=submissions]").check()
    page.select_option("#d-status", "approved")
    page.fill("#d-reason", "matches its peers")
    page.get_by_role("button", name="Apply to ticked runs").click()
    page.locator(".messages", has_text="2 submission(s) now approved.").wait_for()
    assert page.evaluate("window.stillHere === true")
    assert page.locator(f"#run-{first}").count() == 0
    approved = Submission.objects.filter(run_id__in=[first, second])
    assert {(s.status, s.moderation_note) for s in approved} == {
        (Status.APPROVED, "matches its peers")
    }
    page.screenshot(path=str(SHOTS / "queue-after-1280.png"), full_page=True)
    context.close()
    _reject_the_flagged_run_without_javascript(browser, live_server, queue_data["flagged"])


def _reject_the_flagged_run_without_javascript(browser, live_server, flagged: int) -> None:
    """Filter to the flagged runs, tick the page by its link, reject: no script needed."""
    context = browser.new_context(viewport=PHONE, java_script_enabled=False)
    page = context.new_page()
    _sign_in(page, live_server.url)
    page.select_option("#f-status", "flagged")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"status=flagged"))
    page.get_by_role("link", name="Tick every run on this page").click()
    page.wait_for_url(re.compile(r"select=all"))
    assert page.locator("input[name=submissions]:checked").count() == 1
    page.select_option("#d-status", "rejected")
    page.fill("#d-reason", "900 tok/s is above the card's ceiling")
    page.get_by_role("button", name="Apply to ticked runs").click()
    page.wait_for_url(re.compile(r"/moderation/\?status=flagged&channel=$"))
    assert "1 submission(s) now rejected." in page.locator(".messages").inner_text()
    assert _no_page_overflow(page)
    page.screenshot(path=str(SHOTS / "queue-nojs-390.png"), full_page=True)
    context.close()
    assert Submission.objects.get(run_id=flagged).status == Status.REJECTED
