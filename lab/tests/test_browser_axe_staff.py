"""The moderators' and lab operators' pages at 390, 1280, 1366 and 1920 px in both themes
(issue 18): zero serious or critical axe-core findings, no sideways page scroll, no clipped table
and no box scrolling on its own (the checks of leaderboard/tests/test_browser_layout.py, which
with test_browser_axe.py covers the public and the submitter's pages). Full-page screenshots go
to bench/out/screenshots/staff/."""

from __future__ import annotations

import pytest

from lab import services
from lab.tests.test_browser_lab import (  # noqa: F401
    _sync_code_beside_an_event_loop,
    browser,
)
from leaderboard.tests.test_browser import SCREENSHOTS
from leaderboard.tests.test_browser_axe import RUN_AXE, axe_script  # noqa: F401
from leaderboard.tests.test_browser_layout import WIDTHS, _check, owner_pages, signed_in

pytestmark = pytest.mark.browser
SHOTS = SCREENSHOTS / "staff"


def _findings(browser, live_server, user, pages: dict[str, str], script) -> list[str]:  # noqa: F811
    SHOTS.mkdir(parents=True, exist_ok=True)
    found = []
    for scheme in ("light", "dark"):
        for width in WIDTHS:
            phone = width < 500
            viewport = {"width": width, "height": 844 if phone else 900}
            context = signed_in(
                browser, live_server, user, viewport=viewport, color_scheme=scheme,
                is_mobile=phone, bypass_csp=True,
            )  # fmt: skip
            page = context.new_page()
            for name, path in pages.items():
                answer = page.goto(f"{live_server.url}{path}")
                assert answer is not None and answer.status == 200, (name, path)
                found += _check(page, name, width)
                slug = name.replace(" ", "-")
                page.screenshot(path=SHOTS / f"{slug}-{width}-{scheme}.png", full_page=True)
                page.add_script_tag(path=str(script))
                found += [
                    f"{name} {width}px {scheme}: {v['impact']} {v['id']} "
                    f"({v['help']}) at {v['targets']}"
                    for v in page.evaluate(RUN_AXE)
                ]
            context.close()
    return found


def test_a_moderators_pages_at_every_width(
    live_server,
    browser,  # noqa: F811
    axe_script,  # noqa: F811
    bob,
    alice,
    alice_key,
    envelope,
) -> None:
    waiting = owner_pages(alice_key, envelope)["pending-run"]
    pages = {
        "moderation queue": "/moderation/",
        "moderation waiting run": waiting,
        "moderation submitters": "/moderation/submitters/",
        "moderation trust": f"/moderation/submitters/{alice.pk}/trust/",
        "moderation log": "/moderation/log/",
        "moderation add hardware": "/moderation/hardware/add/",
    }
    findings = _findings(browser, live_server, bob, pages, axe_script)
    assert not findings, "\n".join(findings)


def test_a_lab_operators_pages_at_every_width(
    live_server,
    browser,  # noqa: F811
    axe_script,  # noqa: F811
    operator,
    lab_hosts,
) -> None:
    job = services.queue_job(
        requested_by=operator, model="qwen3-8b-q4", endpoint_url="http://10.0.0.9", pool="cpu"
    )
    pages = {
        "lab queue": "/lab/",
        "lab new job": "/lab/jobs/new/",
        "lab job": f"/lab/jobs/{job.pk}/",
        "lab hosts": "/lab/hosts/",
        "lab host": f"/lab/hosts/{lab_hosts[1].pk}/",
        "lab notifications": "/lab/notifications/",
    }
    findings = _findings(browser, live_server, operator, pages, axe_script)
    assert not findings, "\n".join(findings)
