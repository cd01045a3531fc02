"""Conditional GETs for feeds and exports: ETag and Last-Modified, and 304 when nothing changed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import wraps

from django.http import HttpRequest, HttpResponse
from django.utils.cache import get_conditional_response, patch_cache_control
from django.utils.http import http_date, quote_etag

Validators = Callable[..., tuple[str, datetime] | None]


def revalidated(validators: Validators) -> Callable:
    """Decorate a GET view whose answer `validators(request, *args, **kwargs)` summarises as
    (an ETag, the time of the last change), or None when it cannot tell.

    A request whose If-None-Match (or, without one, If-Modified-Since) matches gets 304 and the
    view is not called. Answers say `no-cache`: clients may keep them but ask again each time,
    which costs a 304 when the data has not changed.
    """

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            found = validators(request, *args, **kwargs)
            if found is None:
                return view(request, *args, **kwargs)
            etag, changed = quote_etag(found[0]), int(found[1].timestamp())
            response = get_conditional_response(request, etag=etag, last_modified=changed)
            if response is None:
                response = view(request, *args, **kwargs)
            if response.status_code in (200, 304):
                response.headers["ETag"] = etag
                response.headers["Last-Modified"] = http_date(changed)
                patch_cache_control(response, no_cache=True)
            return response

        return wrapper

    return decorator
