"""What a full disk raises, from real SQLite and file writes on a full tmpfs, is answered 507
naming the disk (core/unavailable.py). The whole drill on a running embedded install:
leaderboard/tests/test_embedded_disk_full.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from django.db import OperationalError

from core.unavailable import is_disk_full, unavailable_response
from worker.tests.disk import fill, tmpfs


@pytest.fixture
def full_disk(tmp_path: Path):
    with tmpfs(tmp_path / "disk", "1m") as disk:
        yield disk


def _sqlite_error(database: Path, *, connected_before_filling: bool) -> sqlite3.Error:
    """The error of an INSERT on a full disk, from a connection opened before the disk filled
    (its shared memory is sized: SQLite fails to grow the log) or after (it fails sooner)."""
    setup = sqlite3.connect(database)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE t (x)")
    setup.commit()
    early = sqlite3.connect(database) if connected_before_filling else None
    if early:
        early.execute("SELECT 1 FROM t").fetchall()
    setup.close()
    fill(database.parent)
    writer = early or sqlite3.connect(database)
    with pytest.raises(sqlite3.OperationalError) as caught:
        writer.execute("INSERT INTO t VALUES (1)")
        writer.commit()
    return caught.value


@pytest.mark.parametrize(
    ("connected_before_filling", "reported"),
    [(True, "SQLITE_FULL"), (False, "SQLITE_IOERR_SHMSIZE")],
)
def test_sqlite_on_a_full_disk_is_a_full_disk_however_it_says_so(
    full_disk, connected_before_filling, reported
) -> None:
    database = full_disk / "site.sqlite3"
    error = _sqlite_error(database, connected_before_filling=connected_before_filling)
    assert error.sqlite_errorname == reported
    assert is_disk_full(error, sqlite_database=str(database))


def test_a_sqlite_io_error_with_space_left_is_not_a_full_disk(tmp_path) -> None:
    error = sqlite3.OperationalError("disk I/O error")
    error.sqlite_errorcode = sqlite3.SQLITE_IOERR_WRITE
    assert not is_disk_full(error, sqlite_database=str(tmp_path / "site.sqlite3"))
    assert not is_disk_full(OperationalError("database is locked"))


def test_a_file_write_on_a_full_disk_answers_507_in_the_apis_shape(full_disk, rf) -> None:
    fill(full_disk)
    with pytest.raises(OSError) as caught:
        (full_disk / "cache-entry").write_bytes(b"x" * 65536)
    # As kombu raises it from the filesystem broker: its own error, from the OSError.
    try:
        raise RuntimeError("Cannot add file to directory") from caught.value
    except RuntimeError as wrapped:
        answer = unavailable_response(rf.post("/api/v1/runs"), wrapped)
    assert answer.status_code == 507
    assert answer["Retry-After"] == "60"
    assert json.loads(answer.content)["error"] == {
        "code": "disk_full",
        "message": "The server's disk is full, so this request could not be completed. "
        "Try again once its operator has freed space.",
    }
    page = unavailable_response(rf.get("/account/login/"), caught.value)
    assert page.status_code == 507 and "disk is full" in page.content.decode()
