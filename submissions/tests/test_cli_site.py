"""`submit` and `login` in-process against the real site (pytest-django's live_server).

test_cli_against_site.py (beside this file) drives the whole CLI in subprocesses (login, run,
submit); this file covers the edges: answer codes, idempotency, exit codes, expiry, slow_down.
"""

from __future__ import annotations

import json
import shutil
import stat
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.db.models import F
from django.utils import timezone

from runs.models import Run
from submissions import keys, services
from submissions.models import ApiKey, Channel, DeviceAuthorization, Submission, SubmitterProfile
from worker.cli import main
from worker.engine.bundle import load_bundle, upload_view
from worker.engine.site import api_key_for, device_poll, device_start, site_url
from worker.engine.testing.xllama_launcher import free_port
from worker.tests.test_engine_bundle import FIXTURES, needs_fixtures

pytestmark = pytest.mark.django_db(transaction=True)

PENDING = DeviceAuthorization.State.PENDING


@pytest.fixture
def fast_polls(settings) -> None:
    """The site tells the CLI to poll every 5 s; 1 s keeps a real-time login short. The site
    runs in this process (live_server), so its own interval check uses the same value."""
    settings.DEVICE_POLL_INTERVAL = 1


def _sent_body_is(view: dict) -> Submission:
    """The one stored submission, checked to be exactly `view`: the site hashes the body it
    received (ids aside), so leak checks on `view` hold for what went over the wire."""
    submission = Submission.objects.get()
    assert submission.content_hash == services.content_hash(view)
    return submission


def _after_first_poll(action: Callable[[DeviceAuthorization], None]) -> threading.Thread:
    """In a thread: once the site has answered the CLI's code with authorization_pending, run
    `action` on it (the user approves, or the code runs out)."""

    def work() -> None:
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                auth = DeviceAuthorization.objects.filter(
                    state=PENDING, last_polled_at__isnull=False
                ).first()
                if auth:
                    action(auth)
                    break
                time.sleep(0.05)
        finally:
            # Whatever happened, end a login still pending so the CLI never waits out the
            # code's ten minutes.
            DeviceAuthorization.objects.filter(state=PENDING).update(expires_at=timezone.now())
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


@pytest.mark.llm
def test_submit_sends_the_upload_view_and_is_idempotent(
    live_server, alice, alice_key, llm_url, bench_home, capsys, settings
):
    """A real run is stored once (201, then 200 for the resend) and nothing private is sent."""
    settings.SITE_URL = live_server.url
    run_args = ["run", "--url", llm_url, "--tasks", "speed-p128-n256", "--trials", "1"]
    assert main([*run_args, "--max-tokens", "8", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    args = ["submit", "--site", live_server.url, "--json"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCHLOOP_API_KEY", alice_key)
        assert main(args) == 0
        first = json.loads(capsys.readouterr().out)
        assert main([*args[:1], run["run_id"], *args[1:]]) == 0
        second = json.loads(capsys.readouterr().out)
    assert first["created"] is True and first["status_code"] == 201
    assert second["created"] is False and second["status_code"] == 200
    assert first["url"] == second["url"]

    view = upload_view(load_bundle(Path(run["path"])), secrets=[alice_key])
    submission = _sent_body_is(view)
    assert submission.submitter == alice and submission.channel == Channel.API_KEY
    assert submission.client_run_id == run["client_run_id"]
    assert first["url"] == f"{live_server.url}/runs/{submission.run_id}/"
    assert (first["review"], first["published"]) == ("pending", False)
    text = json.dumps(view)
    assert llm_url not in text and llm_url.split("//")[1] not in text and alice_key not in text
    assert "endpoint" not in view["machine"]
    # Per-chunk timings reach the site, so it can recompute speed from the samples.
    stored = Run.objects.get().raw_payload
    assert stored["suites"]["speed"]["tasks"][0]["metadata"]["trials"][0]["timings"]["chunk_ms"]
    record = json.loads((Path(run["path"]).parent / "submission.json").read_text())
    assert record["client_run_id"] == run["client_run_id"] and record["status_code"] == 200


@needs_fixtures
@pytest.mark.parametrize(
    "fixture",
    ["v3-full-local/run.json", "v2-0.2.3-local/run.json"],
)
def test_submit_without_a_key_or_site_fails_with_clear_exit_codes(
    live_server, alice_key, bench_home, fixture, capsys
):
    """Usage (2), auth (4) and connection (3) failures; then an older CLI's run uploads cleanly."""
    target = bench_home / "runs" / Path(fixture).parent.name
    target.mkdir(parents=True)
    shutil.copy(FIXTURES / "generated" / fixture, target / "run.json")
    assert main(["submit"]) == 2  # no site anywhere
    assert main(["submit", "--site", live_server.url]) == 4  # no key
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCHLOOP_API_KEY", "bl_wrong")
        assert main(["submit", "--site", live_server.url]) == 4  # the site answers 401
        assert not Submission.objects.exists()
        assert main(["submit", "--site", f"http://127.0.0.1:{free_port()}"]) == 3
        mp.setenv("BENCHLOOP_API_KEY", alice_key)
        assert main(["submit", "--site", live_server.url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status_code"] == 201
    view = upload_view(load_bundle(target / "run.json"), secrets=[alice_key])
    _sent_body_is(view)
    assert "machine_id" not in view["machine"]  # the file's MAC-derived id is not sent
    assert "localhost:11434" not in json.dumps(view)
    assert "Traceback" not in capsys.readouterr().err


@needs_fixtures
def test_submit_says_whether_the_run_waits_for_a_moderator_and_links_it_absolutely(
    live_server, alice_key, mallory, mallory_key, bench_home, capsys, settings
):
    settings.SITE_URL = live_server.url
    SubmitterProfile.objects.create(user=mallory, is_trusted=True)  # auto-approved
    for key, fixture in ((alice_key, "v3-full-local"), (mallory_key, "v2-0.2.3-local")):
        target = bench_home / "runs" / fixture
        target.mkdir(parents=True)
        shutil.copy(FIXTURES / "generated" / fixture / "run.json", target / "run.json")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("BENCHLOOP_API_KEY", key)
            assert main(["submit", fixture, "--site", live_server.url]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    alice_run, mallory_run = Submission.objects.order_by("id").values_list("run_id", flat=True)
    # Each link on a line of its own, whole (issue 32), after what the site did with the run.
    first = lines.index(f"{live_server.url}/runs/{alice_run}/")
    second = lines.index(f"{live_server.url}/runs/{mallory_run}/")
    pending, published = " ".join(lines[:first]), " ".join(lines[first + 1 : second])
    assert pending.endswith(
        ": uploaded; pending review: it appears on the leaderboard once a moderator approves it"
    )
    assert published.endswith(": uploaded; published on the leaderboard")


def test_login_polls_until_approved_and_saves_the_key_privately(
    live_server, alice, alice_client, bench_home, fast_polls, capsys
):
    """The CLI keeps polling through authorization_pending until alice approves on /device/."""
    pages: list[str] = []

    def approve(auth: DeviceAuthorization) -> None:
        pages.append(alice_client.post("/device/", {"code": auth.user_code}).content.decode())

    approver = _after_first_poll(approve)
    assert main(["login", "--site", live_server.url, "--json"]) == 0
    approver.join(timeout=10)
    assert pages and "Approved" in pages[0]
    out = json.loads(capsys.readouterr().out)
    creds = Path(out["credentials"])
    assert stat.S_IMODE(creds.stat().st_mode) == 0o600
    saved = json.loads(creds.read_text())["api_key"]
    auth = DeviceAuthorization.objects.get()
    assert auth.state == DeviceAuthorization.State.CONSUMED
    # The saved key is the one the site issued to alice, and it was issued once.
    assert auth.api_key == ApiKey.objects.get(user=alice)
    assert auth.api_key.hashed_key == keys.keyed_hash(saved, purpose="api-key")
    # The saved login now supplies both the site and the key.
    assert site_url(None) == live_server.url
    assert api_key_for(live_server.url) == saved


def test_login_reports_an_expired_code(live_server, bench_home, fast_polls, capsys):
    """A code that runs out while pending ends the login with exit 4 and saves nothing."""

    def expire(auth: DeviceAuthorization) -> None:
        DeviceAuthorization.objects.filter(pk=auth.pk).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )

    expirer = _after_first_poll(expire)
    assert main(["login", "--site", live_server.url]) == 4
    expirer.join(timeout=10)
    assert "expired" in capsys.readouterr().err
    assert not (bench_home / "credentials.json").exists()
    assert not ApiKey.objects.exists()


def test_login_reports_a_denied_login(live_server, alice_client, bench_home, fast_polls, capsys):
    """alice denies the code on /device/: the CLI says so (RFC 8628's access_denied), exits 4
    and saves nothing."""

    def deny(auth: DeviceAuthorization) -> None:
        alice_client.post("/device/", {"code": auth.user_code, "decision": "deny"})

    denier = _after_first_poll(deny)
    assert main(["login", "--site", live_server.url]) == 4
    denier.join(timeout=10)
    assert "The request was denied. (access_denied)" in capsys.readouterr().err
    assert DeviceAuthorization.objects.get().state == DeviceAuthorization.State.DENIED
    assert not (bench_home / "credentials.json").exists()
    assert not ApiKey.objects.exists()


def test_slow_down_lengthens_the_polling_interval(live_server, alice, settings):
    """After the site's slow_down the CLI waits 5 s longer, which the site then accepts."""
    grant = device_start(live_server.url)
    assert grant.interval == settings.DEVICE_POLL_INTERVAL == 5
    auth = DeviceAuthorization.objects.get()
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        # Time passes for the site's record only, so the test runs in no real time; the
        # second wait is cut short to make the CLI poll too early.
        waits.append(seconds)
        if len(waits) != 2:
            DeviceAuthorization.objects.filter(pk=auth.pk, last_polled_at__isnull=False).update(
                last_polled_at=F("last_polled_at") - timedelta(seconds=seconds)
            )
        if len(waits) == 4:
            assert services.approve_device_authorization(user_code=grant.user_code, user=alice)

    key = device_poll(live_server.url, grant, sleep=sleep)
    # pending, slow_down, pending at the longer interval, then the key.
    assert waits == [5, 5, 10, 10]
    auth.refresh_from_db()
    assert auth.interval == 10  # the site's new interval is the one the CLI adopted
    assert auth.api_key.user == alice
    assert auth.api_key.hashed_key == keys.keyed_hash(key, purpose="api-key")
