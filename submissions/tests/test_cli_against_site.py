"""The real `benchloop` CLI against the real site: login by device code, run, submit, repeat."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.test import Client

from runs.lanes import lane_version
from runs.models import Run, TaskResult
from submissions.models import ApiKey, Channel, Submission

pytestmark = [pytest.mark.llm, pytest.mark.django_db(transaction=True)]


def _cli(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "BENCHLOOP_HOME": str(home), **env}
    full_env.pop("BENCHLOOP_API_KEY", None) if "BENCHLOOP_API_KEY" not in env else None
    return subprocess.run(
        [sys.executable, "-m", "worker.cli", *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_login_run_and_submit_with_the_real_cli(
    live_server, alice, tmp_path, llm_url, llm_model
) -> None:
    home = tmp_path / "bench-home"
    login = subprocess.Popen(
        [sys.executable, "-m", "worker.cli", "login", "--site", live_server.url, "--json"],
        env={**os.environ, "BENCHLOOP_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The CLI shows the user code; a signed-in user approves it on the site.
    deadline = time.monotonic() + 60
    code = None
    while code is None and time.monotonic() < deadline:
        from submissions.models import DeviceAuthorization

        pending = DeviceAuthorization.objects.filter(state="pending").first()
        code = pending.user_code if pending else None
        time.sleep(0.2)
    assert code, "the CLI never started a device login"
    browser = Client()
    browser.force_login(alice)
    assert "Approved" in browser.post("/device/", {"code": code}).content.decode()
    out, err = login.communicate(timeout=120)
    assert login.returncode == 0, err
    credentials = home / "credentials.json"
    assert credentials.exists() and oct(credentials.stat().st_mode)[-3:] == "600"
    assert ApiKey.objects.filter(user=alice).count() == 1

    run = _cli(
        "run",
        "--url",
        llm_url,
        "--model",
        llm_model,
        "--suites",
        "speed",
        "--tasks",
        "speed-p128-*",
        "--trials",
        "3",
        "--max-tokens",
        "24",
        "--json",
        home=home,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    bundle_path = Path(json.loads(run.stdout)["path"])
    bundle = json.loads(bundle_path.read_text())

    first = _cli("submit", "--site", live_server.url, "--json", home=home)
    assert first.returncode == 0, first.stderr[-2000:]
    again = _cli("submit", "--site", live_server.url, "--json", home=home)
    assert again.returncode == 0, again.stderr[-2000:]
    submission = Submission.objects.get()
    assert submission.submitter == alice and submission.channel == Channel.API_KEY
    assert submission.client_run_id == bundle["client_run_id"]
    stored = Run.objects.get()
    assert stored.source_format == "bundle-1"
    assert TaskResult.objects.filter(suite_result__run=stored).count() == 1
    # The bundle's speed method reaches the run, and its speed-only lane is method 2's alone:
    # method 1's runs (the nine-cell grid) never pool with it.
    assert bundle["speed_method_version"] == "2" and stored.speed_version == "2"
    assert stored.score_scale == "speed" and lane_version(stored) == "2"
    assert stored.decode_tps_median == pytest.approx(
        bundle["speed_summary"]["decode_tps"]["median"]
    )
    assert stored.speed_sample_count == bundle["speed_summary"]["decode_tps"]["n"]
    # The endpoint the CLI measured never reaches the server.
    port = re.search(r":(\d+)", llm_url).group(1)
    assert f"127.0.0.1:{port}" not in json.dumps(stored.raw_payload)
