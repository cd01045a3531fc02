"""Security headers that Django does not set on its own, a guard against NUL in URLs, and
chunked request bodies."""

from __future__ import annotations

import io
from collections.abc import Callable

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream, WSGIRequest
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest

from core.errors import answers_in_json, json_error


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
    or ?q=%00 that reached a query would end in a 500 instead of a clear answer.

    Cookies are not refused here: the one that reaches a query, the session key, is checked
    where it is read (submissions.sessions), so a bad cookie costs a fresh session, not a 400
    on every page until the visitor finds how to clear it.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path or any(
            "\x00" in key or "\x00" in value
            for key, values in request.GET.lists()
            for value in values
        ):
            if request.path.startswith("/api/"):
                return json_error(400, "bad_request", "The URL contains a NUL character.")
            return HttpResponseBadRequest("The URL contains a NUL character.")
        return self.get_response(request)


class ChunkedBodyMiddleware:
    """Read a `Transfer-Encoding: chunked` body, which Django's WSGI request reads as empty.

    Django takes the body's length from Content-Length, which a chunked request does not send.
    A server that decodes the chunks itself and marks the input as ending with the body
    (gunicorn sets wsgi.input_terminated) can be read to its end, up to the upload limit (413
    beyond it); behind any other server the body cannot be read safely, so 411 asks for a
    Content-Length instead of treating the request as empty.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        chunked = "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
        if not chunked or not isinstance(request, WSGIRequest):  # ASGI reads the whole body
            return self.get_response(request)
        if not request.META.get("wsgi.input_terminated"):
            return _refuse(request, 411, "length_required", "Send the body with a Content-Length.")
        limit = max(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0, settings.BENCHLOOP_MAX_UPLOAD_BYTES)
        body = request.META["wsgi.input"].read(limit + 1)
        if len(body) > limit:
            return _refuse(
                request, 413, "payload_too_large", f"The body is larger than {limit} bytes."
            )
        # As if it had come with a Content-Length: the views' own size checks then apply.
        request.META["CONTENT_LENGTH"] = str(len(body))
        # django-stubs type _stream as BinaryIO; WSGIRequest itself puts a LimitedStream there.
        request._stream = LimitedStream(io.BytesIO(body), len(body))  # type: ignore[assignment]
        return self.get_response(request)


def _refuse(request: HttpRequest, status: int, code: str, message: str) -> HttpResponse:
    if answers_in_json(request):
        return json_error(status, code, message)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
