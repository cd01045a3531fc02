"""The price of a rendered page: HTML (and every other non-API page a view computes) counts
per requester, as the API's reads do: per account when signed in, else per client address
(FORM_THROTTLE_RATES["page_render"], the forms' window counter). Over the rate a page
answers 429 with the site's 429 page and Retry-After.

What the shared page cache answers costs nothing, so it does not count: the request is
counted as it comes in, and the cache takes the count back when it serves the whole page
(leaderboard.cache.render_page calls `served_from_cache`). A client that spent its budget on
uncached variants waits, for those pages too, until its window ends.

Like the API throttles, a counter that cannot be reached lets the page through (logged).
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse

from core.formlimits import seconds_to_wait, too_many_requests, uncount
from core.throttling import COUNTER_ERRORS

log = logging.getLogger(__name__)
SCOPE = "page_render"
# The API (its own throttles), the health probe, and what the site serves as files.
EXEMPT_PREFIXES = ("/api/", "/healthz", "/static/", "/media/")
WHY = (
    "Pages are limited per visitor, so that no crawler can slow the site down for everyone. "
    "The API has limits of its own (see /api/v1/docs/)."
)


class PageRenderLimitMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method not in ("GET", "HEAD") or request.path.startswith(EXEMPT_PREFIXES):
            return self.get_response(request)
        try:
            wait = seconds_to_wait(request, SCOPE)
        except COUNTER_ERRORS as exc:
            log.warning("page render not counted (failing open): %r", exc)
            return self.get_response(request)
        if wait:
            return too_many_requests(request, wait, why=WHY)
        request._page_render_counted = True  # type: ignore[attr-defined]
        return self.get_response(request)


def served_from_cache(request: HttpRequest) -> None:
    """The whole page came from the shared cache: take back the request's count."""
    if getattr(request, "_page_render_counted", False):
        request._page_render_counted = False  # type: ignore[attr-defined]
        try:
            uncount(request, SCOPE)
        except COUNTER_ERRORS as exc:
            log.warning("page render count not taken back: %r", exc)
