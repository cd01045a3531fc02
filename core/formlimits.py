"""Rate limits for the HTML forms (sign-up, device approval, reports, keys, lab jobs, mail).

They count with the one window counter the API throttles use (throttling.count_in_window),
per account when signed in, else per client address, per fixed window like CountingThrottle.
Over the limit a form answers 429 with Retry-After: a page for browsers, the API's error shape
for clients that ask for JSON.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import time

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from rest_framework.throttling import BaseThrottle

from core.throttling import count_in_window, limits_cache

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def client_address(request: HttpRequest) -> str:
    """The client's address as the API throttles see it (honours REST_FRAMEWORK NUM_PROXIES)."""
    # get_ident reads only request.META, which every HttpRequest has; the stubs ask for DRF's
    # Request.
    return BaseThrottle().get_ident(request)  # type: ignore[arg-type]


def _digest(text: str) -> str:
    # Attacker-chosen text (addresses, emails) never becomes a raw cache key.
    return hashlib.sha256(text.strip().lower().encode()).hexdigest()


def _requester(request: HttpRequest) -> str:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"user:{user.pk}"
    return f"addr:{_digest(client_address(request))}"


def _window(request: HttpRequest, scope: str, about: str) -> tuple[str, int, int, int] | None:
    """(counter key, window length, limit, window number) of this request in `scope` now, or
    None when the scope has no rate."""
    rate = settings.FORM_THROTTLE_RATES.get(scope)
    if not rate:
        return None
    number, period = rate.split("/")
    duration = _PERIODS[period[0]]
    who = f"about:{_digest(about)}" if about else _requester(request)
    window = math.floor(time.time() / duration)
    return f"form:{scope}:{who}:{window}", duration, int(number), window


def seconds_to_wait(request: HttpRequest, scope: str, *, about: str = "") -> int:
    """Count this request in `scope` (per requester, or per `about` when given: an email
    address, say); 0 while within FORM_THROTTLE_RATES[scope], else seconds to wait."""
    found = _window(request, scope, about)
    if found is None:
        return 0
    key, duration, limit, window = found
    if count_in_window(key, duration + 5) <= limit:
        return 0
    return max(1, math.ceil((window + 1) * duration - time.time()))


def uncount(request: HttpRequest, scope: str) -> None:
    """Take back this request's count in `scope` (it turned out to cost nothing)."""
    found = _window(request, scope, "")
    if found is not None:
        with contextlib.suppress(ValueError):  # the window ended meanwhile
            limits_cache().decr(found[0])


def too_many_requests(request: HttpRequest, wait: int, *, why: str = "") -> HttpResponse:
    """429 with Retry-After, as a page or, for clients that ask for JSON, the API's shape;
    `why` replaces the page's word on what the limit is for (the forms')."""
    minutes = -(-wait // 60)
    when = f"{minutes} minute{'s' if minutes != 1 else ''}" if wait >= 60 else f"{wait} s"
    message = f"Too many requests of this kind. Try again in {when}."
    if "application/json" in request.headers.get("Accept", ""):
        response: HttpResponse = JsonResponse(
            {"error": {"code": "throttled", "message": message}}, status=429
        )
    else:
        response = render(request, "429.html", {"message": message, "why": why}, status=429)
    response["Retry-After"] = str(wait)
    return response


def limit_posts(scope: str):
    """Decorator: a view's POSTs count against `scope`; over the rate they answer 429."""

    def decorate(view):
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if request.method == "POST":
                wait = seconds_to_wait(request, scope)
                if wait:
                    return too_many_requests(request, wait)
            return view(request, *args, **kwargs)

        return wrapped

    return decorate
