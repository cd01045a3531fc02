"""axe-core on the moderators' and lab operators' pages in both themes (issue 18): zero serious
or critical findings there too (leaderboard/tests/test_browser_axe.py covers the public and the
submitter's pages, and fetches axe-core)."""

from __future__ import annotations

import pytest

from leaderboard.tests.test_browser_axe import RUN_AXE, axe_script  # noqa: F401
from leaderboard.tests.test_browser_layout import owner_pages, signed_in
from worker import services
from worker.tests.test_browser_lab import (  # noqa: F401
    _sync_code_beside_an_event_loop,
    browser,
)

pytestmark = pytest.mark.browser
VIEWPORTS = ({"width": 1280, "height": 900}, {"width": 390, "height": 844})


def _findings(browser, live_server, user, pages: dict[str, str], script) -> list[str]:  # noqa: F811
    found = []
    for scheme in ("light", "dark"):
        for viewport in VIEWPORTS:
            context = signed_in(
                browser, live_server, user, viewport=viewport, color_scheme=scheme, bypass_csp=True
            )
            page = context.new_page()
            for name, path in pages.items():
                answer = page.goto(f"{live_server.url}{path}")
                assert answer is not None and answer.status == 200, (name, path)
                page.add_script_tag(path=str(script))
                found += [
                    f"{name} {viewport['width']}px {scheme}: {v['impact']} {v['id']} "
                    f"({v['help']}) at {v['targets']}"
                    for v in page.evaluate(RUN_AXE)
                ]
            context.close()
    return found


def test_a_moderators_pages_have_no_serious_axe_findings(
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
        "queue": "/moderation/",
        "waiting run": waiting,
        "submitters": "/moderation/submitters/",
        "trust": f"/moderation/submitters/{alice.pk}/trust/",
        "log": "/moderation/log/",
        "add hardware": "/moderation/hardware/add/",
    }
    findings = _findings(browser, live_server, bob, pages, axe_script)
    assert not findings, "\n".join(findings)


def test_a_lab_operators_pages_have_no_serious_axe_findings(
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
        "queue": "/lab/",
        "new job": "/lab/jobs/new/",
        "job": f"/lab/jobs/{job.pk}/",
        "hosts": "/lab/hosts/",
        "host": f"/lab/hosts/{lab_hosts[1].pk}/",
        "notifications": "/lab/notifications/",
    }
    findings = _findings(browser, live_server, operator, pages, axe_script)
    assert not findings, "\n".join(findings)
