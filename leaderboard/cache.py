"""Anonymous visitors' whole pages, shared until the next publish (core.pagecache holds the
version that makes them stale)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import render
from django.template.loader import render_to_string

from core import pagelimits

# The versioned cache, under the names the public views (and the root conftest) use.
from core.pagecache import (
    NotReady,
    bump,
    cached,
    cached_by_content,
    cached_by_content_each,
    cached_by_content_keyed,
    cached_many,
    computed_again,
    data_version,
    forget_latest,
    invalidate,
)
from leaderboard.context_processors import visitor_theme

__all__ = [
    "NotReady",
    "bump",
    "cached",
    "cached_by_content",
    "cached_by_content_each",
    "cached_by_content_keyed",
    "cached_many",
    "computed_again",
    "data_version",
    "forget_latest",
    "invalidate",
    "render_page",
    "shareable",
]


def shareable(request: HttpRequest) -> bool:
    """Whether the page shows nothing of this visitor but the theme and the CSRF token.

    Without a session cookie nobody is signed in and there is no session data; without a
    message cookie there are no flash messages. Anything else is rendered for the visitor alone.
    """
    cookies = request.COOKIES
    return settings.SESSION_COOKIE_NAME not in cookies and "messages" not in cookies


def render_page(
    request: HttpRequest, template: str, parts: str, context: Callable[[], dict[str, Any]]
) -> HttpResponse:
    """`render(request, template, context())`, or, when `shareable(request)`, one copy shared
    by anonymous visitors until the next publish, keyed by `parts` and the visitor's theme.

    The shared copy is rendered with a random placeholder in place of the CSRF token, stored
    with that placeholder, and each visitor's own token replaces it on the way out, so no
    visitor ever receives another's. `context` is called only when the page is rendered.
    """
    if not shareable(request):
        return render(request, template, context())

    rendered: list[bool] = []

    def compute() -> tuple[str, str]:
        rendered.append(True)
        placeholder = f"csrf-{secrets.token_hex(16)}"
        html = render_to_string(template, {**context(), "csrf_token": placeholder}, request)
        return placeholder, html

    # The page's canonical link and share tags name the scheme and host it was asked on.
    where = f"{request.scheme}://{request.get_host()}"
    placeholder, html = cached("page", f"{where}|{visitor_theme(request)}|{parts}", compute)
    if not rendered:  # a copy from the cache costs the visitor's rate nothing
        pagelimits.served_from_cache(request)
    return HttpResponse(html.replace(placeholder, get_token(request)))
