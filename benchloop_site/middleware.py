"""A database or Redis outage answers 503 with Retry-After and a clear message, never a 500."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views import defaults
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from submissions.errors import answers_in_json, json_error

log = logging.getLogger(__name__)
RETRY_AFTER_SECONDS = 5
# Said of any request: the outage may have struck after a write had committed (a session saved
# on the way out, a view that reads again after saving), so this does not say what was saved.
MESSAGE = "The database is unavailable right now. Try again in a few seconds."
# Said only by a view that knows its transaction was rolled back (see submissions/api.py).
NOTHING_SAVED = (
    "The database is unavailable right now; nothing was saved. Try again in a few seconds."
)
# Redis holds the throttle counters, the cache and the job queue.
QUEUE_MESSAGE = "The queue and cache server is unavailable right now. Try again in a few seconds."


class ServiceUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return unavailable_response(request, exception)


def unavailable_response(
    request: HttpRequest, exception: BaseException, message: str = MESSAGE
) -> HttpResponse | None:
    """503 with Retry-After for an outage of Postgres or Redis; None for any other error.

    `message` replaces the database outage's message, for a view that knows what was saved.
    """
    # OperationalError covers refused and dropped connections, a server shutting down or
    # starting up, and SQLite's "database is locked": all pass, so the client should retry.
    if isinstance(exception, OperationalError | InterfaceError):
        code = "database_unavailable"
    elif isinstance(exception, RedisConnectionError | RedisTimeoutError | BrokerError):
        code, message = "queue_unavailable", QUEUE_MESSAGE
    else:
        return None
    log.warning("%s for %s %s: %s", code, request.method, request.path, exception)
    retry_after = str(RETRY_AFTER_SECONDS)
    if request.path.startswith("/api/"):
        return json_error(503, code, message, Retry_After=retry_after)
    # A standalone page: base.html would reach the session, and so the database, again.
    html = render_to_string("503.html", {"message": message})
    response = HttpResponse(html, status=503)
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
