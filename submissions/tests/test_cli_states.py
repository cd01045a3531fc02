"""Issue 32, the CLI against the real site: which run `submit` sends, how it prints the link, and
the state `list` shows (asked of the site, else the last one known, and "running")."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from submissions.models import Status, Submission
from submissions.services import moderate_submission
from worker.cli import main
from worker.engine.testing.xllama_launcher import free_port

pytestmark = [pytest.mark.llm, pytest.mark.django_db(transaction=True)]
REPO = Path(__file__).resolve().parents[2]
WIDTH = 80
QUICK = ["--trials", "1", "--max-tokens", "8"]


@pytest.fixture(scope="module")
def _one_run(llm_url, tmp_path_factory) -> tuple[Path, dict]:
    """One real run of one speed cell, made once for the tests that only send it and ask its
    state (issue 33: the run is not what they check); each sends its own copy."""
    home = tmp_path_factory.mktemp("states-home")
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(printed):
        mp.setenv("BENCHLOOP_HOME", str(home))
        for name in ("BENCHLOOP_API_KEY", "BENCHLOOP_SITE", "BENCHLOOP_URL"):
            mp.delenv(name, raising=False)
        run = ["run", "--url", llm_url, "--tasks", "speed-p128-n256", *QUICK, "--json"]
        assert main(run) == 0
    return home, json.loads(printed.getvalue())


@pytest.fixture
def finished_run(_one_run, bench_home) -> dict:
    """The module's run, unsent, in this test's own $BENCHLOOP_HOME (its `--json` answer)."""
    home, run = _one_run
    shutil.copytree(home / "runs", bench_home / "runs")
    copied = bench_home / "runs" / run["run_id"] / Path(run["path"]).name
    assert copied.is_file() and not (copied.parent / "submission.json").exists()
    return run | {"path": str(copied)}


def _list(capsys) -> dict[str, dict]:
    assert main(["list", "--json"]) == 0
    return {row["id"]: row for row in json.loads(capsys.readouterr().out)["runs"]}


def test_submit_sends_the_newest_finished_run_and_list_asks_the_site(
    live_server, alice_key, bob, llm_url, bench_home, capsys, monkeypatch, settings
):
    """A long run starts, a short one starts after it and is sent; once the long one ends,
    `submit` with no id sends it (not the short one, which started last), then says nothing
    is left. `list` says "running" while it runs and the site's state once it is known."""
    settings.SITE_URL = live_server.url
    monkeypatch.setenv("BENCHLOOP_API_KEY", alice_key)
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    env = {**os.environ, "BENCHLOOP_HOME": str(bench_home)}
    long_cmd = [sys.executable, "-m", "worker.cli", "run", "--url", llm_url, "--suites", "speed"]
    long_run = subprocess.Popen(
        [*long_cmd, *QUICK, "--json"], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not list((bench_home / "runs").glob("*/run.json")):
            assert time.monotonic() < deadline, "the long run never wrote its bundle"
            time.sleep(0.1)
        (long_id,) = [p.name for p in (bench_home / "runs").iterdir()]
        time.sleep(1.1)  # run ids start with the second they started in: the next sorts after
        assert _list(capsys)[long_id]["status"] == "running"

        short = ["run", "--url", llm_url, "--tasks", "speed-p128-n256", *QUICK, "--json"]
        assert main(short) == 0
        short_id = json.loads(capsys.readouterr().out)["run_id"]
        assert main(["submit", short_id, "--site", live_server.url, "--json"]) == 0
        capsys.readouterr()
        if long_run.poll() is None:
            # Still running: the short run is the only one finished and it is on the site.
            assert main(["submit", "--site", live_server.url]) == 0
            assert "Nothing left to send" in capsys.readouterr().out
        assert long_run.wait(timeout=600) == 0
    finally:
        if long_run.poll() is None:
            long_run.kill()
        long_run.communicate()
    assert long_id < short_id  # the short run started last

    assert main(["submit", "--site", live_server.url]) == 0
    printed = capsys.readouterr()
    lines = printed.out.splitlines()
    sent = Submission.objects.get(client_run_id=_bundle(bench_home, long_id)["client_run_id"])
    url = f"{live_server.url}/runs/{sent.run_id}/"
    assert printed.err.startswith(f"Sending {long_id}")
    # The link is a line of its own, whole; every other line fits the terminal.
    assert url in lines and all(len(line) <= WIDTH for line in lines if line != url)
    assert Submission.objects.count() == 2

    assert main(["submit", "--site", live_server.url]) == 0
    assert "Nothing left to send" in capsys.readouterr().out
    assert Submission.objects.count() == 2

    rows = _list(capsys)
    assert rows[long_id]["status"] == "complete"
    assert rows[long_id]["site_answer"] == "pending review" and rows[long_id]["site_state"] == "now"
    moderate_submission(submission=sent, status=Status.APPROVED, moderator=bob)
    rows = _list(capsys)
    # The upload was answered "pending"; the site says published now.
    assert rows[long_id]["site_answer"] == "published"
    assert rows[short_id]["site_answer"] == "pending review"
    # Then the site stops answering: `list` says the state it last heard, not the upload's.
    record_path = bench_home / "runs" / long_id / "submission.json"
    record = json.loads(record_path.read_text())
    record_path.write_text(json.dumps(record | {"site": f"http://127.0.0.1:{free_port()}"}))
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert _list(capsys)[long_id]["site_answer"] == f"last known: published ({today})"


def test_list_says_last_known_when_the_site_does_not_answer(
    live_server, alice_key, finished_run, capsys, monkeypatch, settings
):
    settings.SITE_URL = live_server.url
    monkeypatch.setenv("BENCHLOOP_API_KEY", alice_key)
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    run = finished_run
    assert main(["submit", "--site", live_server.url, "--json"]) == 0
    sent_on = json.loads(capsys.readouterr().out)["submitted_at"][:10]
    # The site this run went to stops answering (a port nothing listens on).
    record_path = Path(run["path"]).parent / "submission.json"
    record = json.loads(record_path.read_text())
    record["site"] = f"http://127.0.0.1:{free_port()}"
    record_path.write_text(json.dumps(record))
    rows = _list(capsys)
    assert rows[run["run_id"]]["site_answer"] == f"last known: pending review ({sent_on})"
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    assert f"site: last known: pending review ({sent_on})" in text
    # Each line fits but a path, which is a line of its own.
    assert all(len(line) <= WIDTH or line.startswith("/") for line in text.splitlines()), text


def test_the_state_endpoint_answers_the_owner_only(
    client, alice_key, mallory_key, finished_run, capsys, live_server, settings
):
    settings.SITE_URL = live_server.url
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCHLOOP_API_KEY", alice_key)
        assert main(["submit", "--site", live_server.url, "--json"]) == 0
    run_id = Submission.objects.get().run_id
    mine = client.get(
        f"/api/v1/runs/{run_id}/state", headers={"Authorization": f"Bearer {alice_key}"}
    )
    assert mine.status_code == 200
    assert (mine.json()["status"], mine.json()["published"]) == ("pending", False)
    theirs = client.get(
        f"/api/v1/runs/{run_id}/state", headers={"Authorization": f"Bearer {mallory_key}"}
    )
    assert theirs.status_code == 404
    assert client.get(f"/api/v1/runs/{run_id}/state").status_code in (401, 403)


def _bundle(home: Path, run_id: str) -> dict:
    return json.loads((home / "runs" / run_id / "run.json").read_text())
