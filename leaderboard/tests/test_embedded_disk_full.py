"""Fault drill: the embedded default's disk fills up under a running install.

`scripts/serve.sh` runs with its var folder (SQLite, the filesystem broker, the file caches) on
a small tmpfs (worker/tests/disk.py; root only, skipped elsewhere), which the test then fills.
Writes answer 507 and say the disk is full; reads go on; nothing answers 500; once space is
freed the same install takes the upload.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from leaderboard.tests.installs import Browser, embedded_install, get
from worker.tests.disk import fill, tmpfs

pytestmark = [pytest.mark.embedded, pytest.mark.drill]
PASSWORD = "frank's long password"
DISK_FULL = "The server's disk is full"


def _upload(url: str, key: str, payload: dict) -> httpx.Response:
    return httpx.post(
        f"{url}/api/v1/runs",
        json=payload,
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )


def test_a_full_disk_answers_507_naming_the_disk_and_the_site_recovers(
    tmp_path: Path, fixtures_dir: Path, envelope: dict
) -> None:
    # seed_demo imported this run already: a new one is the same run an hour ago.
    timestamp = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    envelope = {**envelope, "run": {**envelope["run"], "timestamp": timestamp}}
    with (
        tmpfs(tmp_path / "disk", "64m") as disk,
        embedded_install(disk / "var", fixtures_dir) as site,
    ):
        site.wait_until_healthy()
        member = Browser(site.url)
        member.sign_up("frank", "frank@example.org", PASSWORD, site.log_text)
        keys = member.submit("/account/keys/", {"name": "laptop", "scopes": ["submit", "read"]})
        key = re.search(r'id="new-key">(bl_[^<]+)<', keys.text).group(1)

        # SQLite reuses its write-ahead log's pages: truncate it, as a checkpoint does, so
        # the next write needs new space, then take every free byte.
        with sqlite3.connect(disk / "var/benchloop.sqlite3", timeout=20) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        filler = fill(disk)

        refused = _upload(site.url, key, envelope)
        assert refused.status_code == 507, refused.text
        assert refused.json()["error"]["code"] == "disk_full"
        assert refused.json()["error"]["message"].startswith(DISK_FULL)
        assert refused.headers["Retry-After"] == "60"

        # Reads need no space: the API (whose throttle counter cannot be written) and pages.
        status, board = get(f"{site.url}/api/v1/leaderboard")
        assert status == 200 and json.loads(board)["count"] > 0
        assert get(f"{site.url}/leaderboard/")[0] == 200

        # Signing in writes a session: the page says why it failed.
        visitor = Browser(site.url)
        signed_in = visitor.submit("/account/login/", {"username": "frank", "password": PASSWORD})
        assert signed_in.status_code == 507
        assert "disk is full" in signed_in.text and "Traceback" not in signed_in.text
        assert "database is unavailable" not in signed_in.text

        assert "Internal Server Error" not in site.log_text()

        filler.unlink()
        stored = _upload(site.url, key, envelope)
        assert stored.status_code == 201, stored.text
