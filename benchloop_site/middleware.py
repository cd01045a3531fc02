"""A database or Redis outage answers 503 with Retry-After and a clear message, never a 500."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from submissions.errors import json_error

log = logging.getLogger(__name__)
RETRY_AFTER_SECONDS = 5
MESSAGE = "The database is unavailable right now; nothing was saved. Try again in a few seconds."
# Redis holds the throttle counters, the cache and the job queue.
QUEUE_MESSAGE = "The queue and cache server is unavailable right now. Try again in a few seconds."


class ServiceUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        # OperationalError covers refused and dropped connections, a server shutting down or
        # starting up, and SQLite's "database is locked": all pass, so the client should retry.
        # A failed request's transaction was rolled back, so "nothing was saved" holds.
        if isinstance(exception, OperationalError | InterfaceError):
            code, message = "database_unavailable", MESSAGE
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
