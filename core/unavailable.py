"""A database or Redis outage answers 503 with Retry-After and a clear message, and a full disk
answers 507 naming the disk: never a 500, and never a traceback. So does a page whose derived
data a worker is computing again (core.pagecache.NotReady)."""

from __future__ import annotations

import errno
import logging
import shutil
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import overload

from django.db import InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views import defaults
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from core.errors import answers_in_json, json_error
from core.pagecache import NotReady

log = logging.getLogger(__name__)
RETRY_AFTER_SECONDS = 5
# Said of any request: the outage may have struck after a write had committed (a session saved
# on the way out, a view that reads again after saving), so this does not say what was saved.
MESSAGE = "The database is unavailable right now. Try again in a few seconds."
# Said only by a view that knows its transaction was rolled back.
NOTHING_SAVED = (
    "The database is unavailable right now; nothing was saved. Try again in a few seconds."
)
# Redis holds the throttle counters, the cache and the job queue.
QUEUE_MESSAGE = "The queue and cache server is unavailable right now. Try again in a few seconds."
# Nothing here says whether a write got through: the broker's message can be what failed,
# after the upload committed. Retrying is safe either way (uploads are idempotent).
DISK_FULL_MESSAGE = (
    "The server's disk is full, so this request could not be completed. "
    "Try again once its operator has freed space."
)
DISK_FULL_RETRY_AFTER_SECONDS = 60
# A derived value (the estimates' calibration) lost from the cache is worked out by a worker.
NOT_READY_MESSAGE = (
    "This page's estimates are being worked out again from the measured data. "
    "Try again in a minute."
)
NOT_READY_RETRY_AFTER_SECONDS = 60
# Postgres's SQLSTATE for "could not extend file: No space left on device".
POSTGRES_DISK_FULL = "53100"
# Less free space than this, and a SQLite I/O error is taken for a full disk: a write needs
# a few pages, and one MiB is hundreds of them.
LOW_SPACE_BYTES = 1024 * 1024


class ServiceUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return unavailable_response(request, exception)


def _chain(exception: BaseException) -> Iterator[BaseException]:
    """The exception and those it was raised from or while handling (kombu wraps OSError)."""
    seen: set[int] = set()
    current: BaseException | None = exception
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _site_sqlite_database() -> str | None:
    database = connection.settings_dict
    return str(database["NAME"]) if connection.vendor == "sqlite" else None


def is_disk_full(exception: BaseException, sqlite_database: str | None = None) -> bool:
    """Whether the error is a full disk: a file write (the file cache, the filesystem broker)
    failing with ENOSPC or EDQUOT, SQLite's "database or disk is full", or Postgres's
    disk_full.

    SQLite reports a full disk as SQLITE_FULL only when it fails to grow its write-ahead log;
    a connection that must first size its shared-memory file (or sync, or truncate) reports
    "disk I/O error" instead (SQLITE_IOERR_SHMSIZE and kin). Such an error counts as a full disk
    when the disk holding `sqlite_database` (default: the site's SQLite database, if it has
    one) has less than LOW_SPACE_BYTES free.
    """
    for error in _chain(exception):
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if getattr(error, "sqlstate", None) == POSTGRES_DISK_FULL:
            return True
        code = getattr(error, "sqlite_errorcode", None)
        if code == sqlite3.SQLITE_FULL:
            return True
        if code is not None and code & 0xFF == sqlite3.SQLITE_IOERR:
            path = sqlite_database or _site_sqlite_database()
            if not path:
                return False
            return _free_bytes(Path(path).parent) < LOW_SPACE_BYTES
    return False


def _free_bytes(folder: Path) -> int:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return LOW_SPACE_BYTES  # cannot tell: not a full disk, then


@overload
def unavailable_response(
    request: HttpRequest, exception: OperationalError | InterfaceError, message: str = ...
) -> HttpResponse: ...
@overload
def unavailable_response(
    request: HttpRequest, exception: BaseException, message: str = ...
) -> HttpResponse | None: ...
def unavailable_response(
    request: HttpRequest, exception: BaseException, message: str = MESSAGE
) -> HttpResponse | None:
    """507 for a full disk, 503 with Retry-After for an outage of the database or Redis or a
    value a worker is computing (core.pagecache.NotReady); None for any other error.

    `message` replaces the database outage's message, for a view that knows what was saved.
    A database error always gets a response (the first overload).
    """
    heading = None  # the 503 page's own
    # Checked first: SQLite and Postgres report a full disk as an OperationalError, and
    # "database unavailable, try again in a few seconds" would send the operator the wrong way.
    if is_disk_full(exception):
        status, code, message = 507, "disk_full", DISK_FULL_MESSAGE
        retry_after = str(DISK_FULL_RETRY_AFTER_SECONDS)
    # OperationalError covers refused and dropped connections, a server shutting down or
    # starting up, and SQLite's "database is locked": all pass, so the client should retry.
    elif isinstance(exception, OperationalError | InterfaceError):
        status, code = 503, "database_unavailable"
        retry_after = str(RETRY_AFTER_SECONDS)
    elif isinstance(exception, RedisConnectionError | RedisTimeoutError | BrokerError):
        status, code, message = 503, "queue_unavailable", QUEUE_MESSAGE
        retry_after = str(RETRY_AFTER_SECONDS)
    elif isinstance(exception, NotReady):
        status, code, message = 503, "not_ready", NOT_READY_MESSAGE
        retry_after = str(NOT_READY_RETRY_AFTER_SECONDS)
        heading = "Being worked out again"
    else:
        return None
    log.warning("%s for %s %s: %s", code, request.method, request.path, exception)
    if answers_in_json(request):
        return json_error(status, code, message, Retry_After=retry_after)
    # A standalone page: base.html would reach the session, and so the database, again.
    html = render_to_string("503.html", {"message": message, "status": status, "heading": heading})
    response = HttpResponse(html, status=status)
    response.headers["Retry-After"] = retry_after
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500. process_exception sees only what views raise; an outage that strikes in a
    middleware (the session saved on the way out, say) arrives here and still answers 503.
    Anything else is a 500, in the API's error shape under /api/."""
    exception = sys.exc_info()[1]
    response = unavailable_response(request, exception) if exception else None
    if response is not None:
        return response
    if answers_in_json(request):
        return json_error(500, "server_error", "Something went wrong on our side.")
    return defaults.server_error(request)
