"""README command 1 on the embedded defaults: SQLite, the filesystem broker, a real worker, and
production settings (DEBUG off, its own secrets, collected static files, the site's error
pages). The whole user journey on this install is in test_journey.py."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from leaderboard.tests.installs import (
    REPO,
    Browser,
    clean_environment,
    embedded_install,
    get,
    wait_for,
)

pytestmark = pytest.mark.embedded
TRACEBACK_MARKERS = ("Traceback", 'File "', "site-packages", "Exception Value", "DEBUG = True")


@pytest.fixture
def embedded_site(tmp_path: Path, fixtures_dir: Path):
    with embedded_install(tmp_path / "var", fixtures_dir) as site:
        site.wait_until_healthy()
        yield site


def _database(site) -> sqlite3.Connection:
    return sqlite3.connect(Path(site.env["BENCHLOOP_VAR_DIR"]) / "benchloop.sqlite3", timeout=20)


def test_serve_script_brings_up_site_and_worker_without_any_server(embedded_site) -> None:
    url = embedded_site.url
    assert json.loads(get(f"{url}/healthz")[1]) == {
        "status": "ok",
        "database": "ok",
        "broker": "ok",
    }
    assert "BenchLoop is starting at http://127.0.0.1:" in embedded_site.log_text()

    assert get(f"{url}/")[0] == 200
    status, html = get(f"{url}/leaderboard/")
    assert status == 200
    # The default view is one hardware class (the one with the most runs): the demo has rows there.
    assert html.count('<td class="num rank">') >= 3
    static_status, _ = get(f"{url}/static/django_htmx/htmx-2.min.js")
    assert static_status == 200

    # Reject the top stack's best run: the stack drops it at once, and the decision enqueues a
    # second refresh through the filesystem broker for the worker process.
    db = _database(embedded_site)
    stack_id, run_id = db.execute(
        "SELECT s.id, s.best_run_id FROM runs_stack s JOIN runs_run r ON r.id = s.best_run_id "
        "WHERE r.score_scale = 'v3' ORDER BY r.overall_score DESC LIMIT 1"
    ).fetchone()
    code = (
        "from submissions.models import Submission; from submissions.services import "
        f"moderate_submission as m; m(submission=Submission.objects.get(run_id={run_id}), "
        "status='rejected', moderator=None, reason='smoke test')"
    )
    done = embedded_site.manage("shell", "-c", code)
    assert done.returncode == 0, done.stderr
    new_best = wait_for(
        lambda: (
            (
                db.execute(
                    "SELECT best_run_id, stats_refreshed_at FROM runs_stack WHERE id = ?",
                    (stack_id,),
                ).fetchone()
                or (run_id,)
            )[0]
            != run_id
            or None
        ),
        60,
        "the worker to refresh the stack",
    )
    assert new_best
    # The decision refreshed the stack itself; the worker must still run the refresh it
    # enqueued through the filesystem broker.
    embedded_site.wait_for_task("runs.refresh_stack_stats")


def _assert_no_internals(body: str) -> None:
    for marker in TRACEBACK_MARKERS:
        assert marker not in body, marker


def test_the_embedded_default_serves_like_production(tmp_path: Path, fixtures_dir: Path) -> None:
    var = tmp_path / "var"
    admin = {"DJANGO_SUPERUSER_USERNAME": "root", "DJANGO_SUPERUSER_PASSWORD": "a long admin pw"}
    with embedded_install(var, fixtures_dir, **admin) as site:
        site.wait_until_healthy()
        url = site.url
        assert "==> created the admin root" in site.log_text()
        secrets = {name: (var / name).read_text() for name in ("secret_key", "api_key_pepper")}
        for name, value in secrets.items():
            assert oct((var / name).stat().st_mode)[-3:] == "600", name
            assert len(value.strip()) >= 50, name
        assert secrets["secret_key"] != secrets["api_key_pepper"]

        # Plain HTTP on localhost: no redirect to https, no HSTS, cookies a browser sends back.
        home = Browser(url).get("/")
        assert home.status_code == 200 and home.url == f"{url}/"
        assert "Strict-Transport-Security" not in home.headers
        assert "secure" not in home.headers["set-cookie"].lower()
        # Collected, hashed static files (whitenoise's manifest), served with a long cache.
        stylesheet = re.search(r'href="(/static/css/site\.[0-9a-f]{12}\.css)"', home.text)
        assert stylesheet, home.text[:1500]
        css = Browser(url).get(stylesheet.group(1))
        assert css.status_code == 200 and "immutable" in css.headers["cache-control"]

        # The site's own error pages, and the API's JSON error shape under /api/.
        status, body = get(f"{url}/no/such/page/")
        assert status == 404 and "Page not found" in body and 'class="site-header"' in body
        _assert_no_internals(body)
        status, body = get(f"{url}/api/v1/no-such-endpoint")
        assert (status, json.loads(body)["error"]["code"]) == (404, "not_found")
        status, body = get(f"{url}/api/v1/leaderboard", Host="evil.example")
        assert (status, json.loads(body)["error"]["code"]) == (400, "bad_request")
        status, body = get(f"{url}/leaderboard/", Host="evil.example")
        assert status == 400 and "could not understand this request" in body
        _assert_no_internals(body)

        # The admin made from DJANGO_SUPERUSER_* moderates; a new member may not.
        moderator = Browser(url)
        moderator.sign_in("root", admin["DJANGO_SUPERUSER_PASSWORD"])
        assert moderator.get("/moderation/").status_code == 200
        member = Browser(url)
        member.sign_up("dana", "dana@example.org", "dana's own long password", site.log_text)
        refused = member.get("/moderation/")
        assert refused.status_code == 403 and "You cannot open this page" in refused.text

    # A restart keeps the secrets, so the admin's session (signed with SECRET_KEY) still holds.
    with embedded_install(var, fixtures_dir, **admin) as site:
        site.wait_until_healthy()
        assert "==> the admin root exists" in site.log_text()
        assert {name: (var / name).read_text() for name in secrets} == secrets
        moderator.client.base_url = site.url
        assert moderator.get("/moderation/").status_code == 200


def test_a_failing_embedded_site_never_hands_out_a_traceback(embedded_site) -> None:
    # Text in a REAL column (SQLite's type affinity lets it in): this run's pages and its API
    # answer fail inside Django, with no database outage to blame. It stands for any bug.
    db = _database(embedded_site)
    (run_id,) = db.execute(
        "SELECT id FROM runs_run WHERE published AND overall_score IS NOT NULL ORDER BY id"
    ).fetchone()
    with db:
        db.execute("UPDATE runs_run SET overall_score = 'not a number' WHERE id = ?", (run_id,))

    status, page = get(f"{embedded_site.url}/runs/{run_id}/")
    assert status == 500
    assert "Something went wrong on our side" in page and 'class="site-header"' in page
    _assert_no_internals(page)
    status, api = get(f"{embedded_site.url}/api/v1/runs/{run_id}")
    assert status == 500
    assert json.loads(api) == {
        "error": {"code": "server_error", "message": "Something went wrong on our side."}
    }
    # The operator gets the traceback, in the server's log.
    assert wait_for(
        lambda: "Internal Server Error: /runs/" in embedded_site.log_text(), 10, "the error log"
    )
    assert "Traceback (most recent call last)" in embedded_site.log_text()


_UPLOADS_ON_SQLITE = """
import json, sys
import django
django.setup()
from django.core.management import call_command
from django.contrib.auth.models import User
from submissions.models import Channel
from submissions.services import SubmissionConflict, submit_run

call_command("migrate", verbosity=0)
payload = json.loads(open(sys.argv[1]).read())
alice = User.objects.create_user("alice")
mallory = User.objects.create_user("mallory")

def outcome(body, user):
    try:
        result = submit_run(payload=body, channel=Channel.API_KEY, submitter=user)
    except SubmissionConflict as exc:
        return "conflict: " + str(exc)
    return [result.submission.pk, result.created, result.duplicate]

keyed = {**payload, "run": {**payload["run"], "client_run_id": "alice-laptop-1"}}
print(json.dumps([
    outcome(payload, alice),
    outcome(payload, alice),
    outcome(keyed, alice),
    outcome(payload, mallory),
]))
"""


def test_signed_in_uploads_and_their_repeats_work_on_sqlite(tmp_path, fixtures_dir) -> None:
    """The repeat lookup on the embedded default's database: a new run, the same upload again,
    the same content under another client run id, and another account's copy."""
    env = clean_environment(BENCHLOOP_VAR_DIR=str(tmp_path / "var"))
    done = subprocess.run(
        [sys.executable, "-c", _UPLOADS_ON_SQLITE]
        + [str(fixtures_dir / "generated/v3-full-local/publish-payload.json")],
        cwd=REPO,
        env={**env, "DJANGO_SETTINGS_MODULE": "benchloop_site.settings"},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first, repeat, same_content, other_account = json.loads(done.stdout.strip().splitlines()[-1])
    assert first[1:] == [True, False]
    assert repeat == [first[0], False, True]  # the same upload again is a duplicate (issue 32)
    assert same_content == [first[0], False, True]
    assert other_account == "conflict: This run was already submitted by another account."
