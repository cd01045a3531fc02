"""A lab operator in headless Chromium queues a job from the new-job form: picks a server on
another host (the job goes to that host), and meets the refusal of a pool nobody serves.

Screenshots of the form at 1280 and 390 px go to bench/out/screenshots/lab/, or to
$LAB_SCREENSHOTS when set.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from lab import services
from lab.models import BenchmarkJob
from leaderboard.tests.test_browser import (  # noqa: F401  (shared fixtures)
    _sync_code_beside_an_event_loop,
    browser,
)

playwright_api = pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.browser
SHOTS = Path(
    os.environ.get(
        "LAB_SCREENSHOTS",
        Path(__file__).resolve().parents[2] / "bench" / "out" / "screenshots" / "lab",
    )
)
WIDE = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
PASSWORD = "correct horse battery"  # alice's, in the root conftest; the operator is alice


def _no_page_overflow(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def _signed_in(browser, live_server, path: str):
    """A wide page where alice (the operator) signed in and landed on `path`."""
    page = browser.new_page(viewport=WIDE)
    page.goto(f"{live_server.url}/account/login/?next={path}")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(re.escape(path) + "$"))
    return page


def _style(page, selector: str, prop: str) -> str:
    return page.eval_on_selector(selector, f"e => getComputedStyle(e).{prop}")


def test_an_operator_queues_a_job_to_a_server_on_another_host(
    live_server, browser, operator, lab_hosts, monkeypatch
) -> None:
    sent = []  # the broker is not under test here: the dispatch is recorded, not sent
    monkeypatch.setattr(services, "dispatch_job", lambda **kw: sent.append(kw))
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = _signed_in(browser, live_server, "/lab/jobs/new/")

    legends = page.locator("fieldset.form-group > legend").all_inner_texts()
    assert legends == [
        "Where it runs",
        "What to benchmark",
        "Endpoint",
        "Managed llama.cpp server",
        "What to run",
    ]
    assert page.get_by_label("API key reference").count() == 1
    # Selects look like the text inputs beside them, not the browser's default.
    for prop in ("borderTopLeftRadius", "paddingLeft", "fontSize"):
        assert _style(page, "#id_pool", prop) == _style(page, "#id_endpoint_url", prop), prop
    for width, viewport in (("1280", WIDE), ("390", PHONE)):
        page.set_viewport_size(viewport)
        assert _no_page_overflow(page), f"the form overflows at {width} px"
        page.screenshot(path=str(SHOTS / f"new-job-{width}.png"), full_page=True)
    page.emulate_media(color_scheme="dark")
    page.screenshot(path=str(SHOTS / "new-job-390-dark.png"), full_page=True)
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(WIDE)

    # A pool no approved host serves: refused on the field, with the pools that are served.
    page.fill("#id_model", "qwen3:8b")
    page.fill("#id_endpoint_url", "http://10.0.0.9:8080")
    page.evaluate(
        "document.querySelector('#id_pool').add(new Option('gpu.h100', 'gpu.h100', true, true))"
    )
    page.get_by_role("button", name="Queue").click()
    page.wait_for_load_state()
    error = page.locator(".field.has-error .error").first.inner_text()
    assert "No approved lab host serves the pool “gpu.h100”" in error
    assert "Pools served now: cpu, gpu.4090." in error
    assert page.locator("#id_pool").input_value() == "gpu.h100"  # the refused choice stays
    page.screenshot(path=str(SHOTS / "new-job-refused-1280.png"), full_page=True)
    assert not BenchmarkJob.objects.exists()

    # The server on lab-4090-a: no model or pool to type, and the job goes to that host.
    page.fill("#id_model", "")
    page.fill("#id_endpoint_url", "")
    page.select_option("#id_server", label="lab-4090-a · llama.cpp · qwen3-8b-q4")
    page.select_option("#id_pool", "")
    page.get_by_role("button", name="Queue").click()
    page.wait_for_url(re.compile(r"/lab/jobs/\d+/$"))
    assert "queued on host lab-4090-a" in page.locator(".messages").inner_text()
    job = BenchmarkJob.objects.get()
    assert (job.pool, job.model) == ("host.lab-4090-a", "qwen3-8b-q4")
    assert [kw["pool"] for kw in sent] == ["host.lab-4090-a"]
    assert page.get_by_role("button", name="Cancel job").count() == 1
    page.set_viewport_size(PHONE)
    assert _no_page_overflow(page)
    page.screenshot(path=str(SHOTS / "job-390.png"), full_page=True)
    page.close()


def test_a_running_jobs_page_at_1280_and_390_px(live_server, browser, operator, lab_hosts):
    """Two attempts' events, trial numbers, the ETA, an offline host and a delivery fit."""
    from datetime import timedelta

    from django.utils import timezone

    from lab.models import WebhookDelivery, WorkerHost

    SHOTS.mkdir(parents=True, exist_ok=True)
    job = services.queue_job(
        requested_by=operator, model="qwen3-8b-q4", endpoint_url="http://10.0.0.9", pool="cpu"
    )
    host = lab_hosts[0]
    for attempt in (1, 2):
        services.claim_job(job_id=job.pk, host=host)
        services.mark_running(job_id=job.pk, attempt=attempt)
        trial = {"type": "trial_completed", "suite": "speed", "task_id": "speed-p512-n16"}
        for seq, tps in enumerate([41.2, 40.8], start=1):
            services.record_event(
                job_id=job.pk,
                attempt=attempt,
                seq=seq,
                event=trial
                | {"trial": seq, "ok": True, "decode_tps": tps, "ttft_ms": 182.0}
                | {"prefill_tps": 950.0},
            )
        if attempt == 1:
            old = timezone.now() - timedelta(minutes=5)
            BenchmarkJob.objects.filter(pk=job.pk).update(heartbeat_at=old)
            services.reap_stale_jobs()
    BenchmarkJob.objects.filter(pk=job.pk).update(
        started_at=timezone.now() - timedelta(minutes=12), total_tasks=8, completed_tasks=3
    )
    WorkerHost.objects.filter(pk=host.pk).update(
        last_heartbeat_at=timezone.now() - timedelta(minutes=3)
    )
    WebhookDelivery.objects.create(
        job=job,
        url="https://hooks.example.org/benchloop/lab",
        payload={},
        attempts=2,
        last_status=503,
        last_error="receiver answered 503",
    )
    page = _signed_in(browser, live_server, f"/lab/jobs/{job.pk}/")
    text = page.locator("#progress").inner_text()
    assert "host offline" in text and "ETA" in text and "Attempt 1" in text
    assert "decode 41.2 tok/s, prefill 950 tok/s, TTFT 182 ms" in text
    for width, viewport in (("1280", WIDE), ("390", PHONE)):
        page.set_viewport_size(viewport)
        assert _no_page_overflow(page), f"the job page overflows at {width} px"
        page.screenshot(path=str(SHOTS / f"job-running-{width}.png"), full_page=True)
    page.close()


def test_an_admin_creates_a_host_key_sees_it_once_and_revokes_it(
    live_server, browser, operator, lab_hosts
) -> None:
    from lab.models import HostKey

    operator.is_staff = True
    operator.save()
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = _signed_in(browser, live_server, "/lab/hosts/")
    page.fill("#id_host_name", "lab-3090-b")
    page.get_by_role("button", name="Create key").click()
    shown = page.locator("#new-host-key").inner_text().strip()
    assert shown.startswith("blh_") and HostKey.objects.get().prefix == shown[4:12]
    for width, viewport in (("1280", WIDE), ("390", PHONE)):
        page.set_viewport_size(viewport)
        assert _no_page_overflow(page), f"the hosts page overflows at {width} px"
        page.screenshot(path=str(SHOTS / f"host-key-{width}.png"), full_page=True)
    page.goto(f"{live_server.url}/lab/hosts/")  # shown once: never again
    assert shown not in page.content()
    page.get_by_role("button", name="Revoke").click()
    page.wait_for_url(re.compile(r"/lab/hosts/$"))
    assert "stops at its next call" in page.content()
    assert HostKey.objects.get().revoked_at is not None
    page.close()
