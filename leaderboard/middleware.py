"""Security headers that Django does not set on its own, and a guard against NUL in URLs."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # Every response, the admin included: since Django 4.2 the admin has no inline script or
        # style of its own (its constants travel in data- attributes), so it needs no exception.
        response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response


class RejectNulMiddleware:
    """400 for a NUL anywhere in the URL: Postgres text cannot hold one, so a /models/a%00b/
    or ?q=%00 that reached a query would end in a 500 instead of a clear answer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path or any(
            "\x00" in key or "\x00" in value
            for key, values in request.GET.lists()
            for value in values
        ):
            if request.path.startswith("/api/"):
                from submissions.errors import json_error

                return json_error(400, "bad_request", "The URL contains a NUL character.")
            return HttpResponseBadRequest("The URL contains a NUL character.")
        return self.get_response(request)
