"""The whole journey, as a user takes it, on each install: `benchloop run` against a real
llama.cpp server, `benchloop login` approved in a signed-in browser session, `benchloop submit`,
a moderator's approval, then the run on the leaderboard, its stack page, the feed and the CSV.

One journey, parametrised by install (leaderboard/tests/installs.py): the embedded default
that README command 1 starts, and Postgres + Redis with a real gunicorn and Celery worker.
Everything goes through the site's HTTP interface and the real CLI; nothing reads the database.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.db import connection

from leaderboard.tests.installs import (
    VENV,
    Browser,
    Install,
    clean_environment,
    collect_static,
    database_url,
    embedded_install,
    get,
    postgres_install,
)

pytestmark = [pytest.mark.embedded, pytest.mark.llm]
MEMBER, MEMBER_PASSWORD = "carol", "carol's long benchmark password"
ADMIN, ADMIN_PASSWORD = "root-admin", "an admin password nobody guesses"
ATOM = "{http://www.w3.org/2005/Atom}"
STACK_LINK = re.compile(r'href="(/stacks/\d+/)(?:\?hw=[a-z0-9.-]+)?"')


def ranked(board_page: str) -> str:
    """A board page without its "Estimated, not measured" section, whose stacks (measured on
    other hardware, never ranked here) link their own pages."""
    return board_page.split('<section class="estimates"')[0]


@pytest.fixture(scope="session")
def static_root(tmp_path_factory) -> Path:
    return collect_static(tmp_path_factory.mktemp("journey-static") / "static")


@pytest.fixture(params=["embedded", "postgres"])
def install(request, tmp_path, fixtures_dir, transactional_db) -> Install:
    if request.param == "embedded":
        with embedded_install(tmp_path / "var", fixtures_dir) as site:
            site.wait_until_healthy()
            yield site
    else:
        # The test database itself, flushed afterwards (transactional_db); nothing in this
        # process touches it while the site's processes run.
        url = database_url(connection.settings_dict)
        connection.close()
        static = request.getfixturevalue("static_root")
        with postgres_install(tmp_path, url, static) as site:
            site.wait_until_healthy()
            yield site


def benchloop(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The installed `benchloop` command, with a private home and no inherited login."""
    return subprocess.run(
        [str(VENV / "bin/benchloop"), *args],
        env=clean_environment(BENCHLOOP_HOME=str(home), COLUMNS="300"),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def benchloop_login(site: Install, home: Path, member: Browser) -> None:
    """`benchloop login`: the CLI shows a code, the signed-in member approves it on /device/."""
    process = subprocess.Popen(
        [str(VENV / "bin/benchloop"), "login", "--site", site.url],
        env=clean_environment(BENCHLOOP_HOME=str(home), COLUMNS="300"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        shown = process.stderr.readline()
        code = re.search(r"enter the code (\S+)", shown)
        assert code, shown + process.stderr.read()
        assert f"{site.url}/device/" in shown
        approved = member.submit("/device/", {"code": code.group(1)})
        assert "Approved." in approved.text, approved.text[-2000:]
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert f"Logged in to {site.url}" in out
    credentials = home / "credentials.json"
    assert oct(credentials.stat().st_mode)[-3:] == "600"


def approve_in_the_queue(site: Install, model: str) -> None:
    """The admin signs in, finds the waiting run in the moderation queue and approves it."""
    site.create_admin(ADMIN, ADMIN_PASSWORD)
    moderator = Browser(site.url)
    moderator.sign_in(ADMIN, ADMIN_PASSWORD)
    # Uploads through the API, apart from the imported community rows the checks held back
    # (README command 1's install has some waiting in the same queue).
    queue = moderator.get("/moderation/?channel=api")
    assert queue.status_code == 200
    rows = [row for row in queue.text.split('<li class="mod-item') if model in row]
    rows = [row for row in rows if MEMBER in row]
    assert len(rows) == 1, queue.text[-3000:]
    submission = re.search(r'name="submissions" value="(\d+)"', rows[0]).group(1)
    decided = moderator.submit(
        "/moderation/",
        {"submissions": submission, "status": "approved", "reason": "checked: looks right"},
        action="/moderation/decide/",
    )
    assert decided.status_code == 200 and "1 submission(s) now approved." in decided.text


def test_a_user_runs_logs_in_submits_and_a_moderator_publishes_the_run(
    install: Install, tmp_path: Path, llm_url: str, llm_model: str
) -> None:
    home = tmp_path / "bench-home"
    site = install.url

    ran = benchloop(
        "run", "--url", llm_url, "--model", llm_model, "--suites", "speed",
        "--tasks", "speed-p128-n256,speed-p512-n16", "--trials", "1", "--max-tokens", "24",
        "--json", home=home,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    bundle = json.loads(Path(json.loads(ran.stdout)["path"]).read_text())
    model = bundle["model"]["model_id"]

    # A new member signs up, and later signs in through the login form to approve the CLI.
    Browser(site).sign_up(MEMBER, f"{MEMBER}@example.org", MEMBER_PASSWORD, install.log_text)
    member = Browser(site)
    member.sign_in(MEMBER, MEMBER_PASSWORD)
    benchloop_login(install, home, member)

    submitted = benchloop("submit", "--json", home=home)
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    answer = json.loads(submitted.stdout)
    assert (answer["status_code"], answer["created"]) == (201, True), answer
    run_path = urlsplit(answer["url"]).path
    # With no id, submit sends only a finished run not yet on the site: none is left.
    left = json.loads(benchloop("submit", "--json", home=home).stdout)
    assert left["nothing_to_send"] is True, left
    again = json.loads(benchloop("submit", answer["run_id"], "--json", home=home).stdout)
    assert (again["status_code"], again["created"]) == (200, False), again

    # A new member's run waits for a moderator: nobody else sees it yet.
    waiting = member.get("/account/runs/")
    assert model in waiting.text and "pending" in waiting.text.lower()
    assert get(site + run_path)[0] == 404
    # A speed-suite run is speed only: it is listed on that scale, never given a score.
    board = f"{site}/leaderboard/?scale=speed&comparable=all&q={model}"
    export = f"{site}/leaderboard/export.csv?scale=speed&comparable=all&q={model}"
    assert STACK_LINK.findall(ranked(get(board)[1])) == []
    assert get(export) == (200, "")

    approve_in_the_queue(install, model)

    # Public, to anyone: the run page, the leaderboard row, the stack page, feed and CSV.
    status, run_page = get(site + run_path)
    assert status == 200 and model in run_page
    # The run page links its hardware class's board, which lists the run on that machine.
    class_board = re.search(r'id="class-board" href="([^"]+)"', run_page)
    assert class_board, run_page[:3000]
    board = site + html.unescape(class_board.group(1)) + f"&comparable=all&q={model}"
    export = board.replace("/leaderboard/?", "/leaderboard/export.csv?")
    status, board_page = get(board)
    assert status == 200
    links = set(STACK_LINK.findall(ranked(board_page)))
    assert len(links) == 1, (board, board_page[board_page.find('id="results"') :][:3000])
    (stack_path,) = links
    status, stack_page = get(site + stack_path)
    assert status == 200 and model in stack_page and run_path in stack_page

    status, feed = get(board.replace("/leaderboard/?", "/leaderboard/feed.atom?"))
    assert status == 200
    links = [link.get("href") for link in ET.fromstring(feed).iter(f"{ATOM}link")]
    assert site + run_path in links, feed[:2000]

    status, exported = get(export)
    assert status == 200
    rows = list(csv.DictReader(io.StringIO(exported)))
    assert [(row["model"], row["best_run_url"]) for row in rows] == [(model, site + run_path)]

    # The worker of this install ran the refresh that the approval queued.
    install.wait_for_task("runs.refresh_stack_stats")
