"""One error shape for every API response: {"error": {"code", "message", "fields"?}}."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.views import exception_handler


class ApiError(exceptions.APIException):
    """An error with our own code and, for validation, the list of failing field paths."""

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        fields: list[dict] | None = None,
        headers: dict | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.error_code = code
        self.fields = fields or []
        self.headers = headers or {}


_CODES = {
    status.HTTP_400_BAD_REQUEST: "bad_request",
    status.HTTP_401_UNAUTHORIZED: "not_authenticated",
    status.HTTP_403_FORBIDDEN: "forbidden",
    status.HTTP_404_NOT_FOUND: "not_found",
    status.HTTP_405_METHOD_NOT_ALLOWED: "method_not_allowed",
    status.HTTP_406_NOT_ACCEPTABLE: "not_acceptable",
    status.HTTP_413_REQUEST_ENTITY_TOO_LARGE: "payload_too_large",
    status.HTTP_415_UNSUPPORTED_MEDIA_TYPE: "unsupported_media_type",
    status.HTTP_429_TOO_MANY_REQUESTS: "throttled",
}


def error_body(code: str, message: str, fields: list[dict] | None = None) -> dict:
    body: dict = {"code": code, "message": message}
    if fields:
        body["fields"] = fields
    return {"error": body}


def api_exception_handler(exc, context):
    if isinstance(exc, RequestDataTooBig):
        exc = ApiError(413, "payload_too_large", "The request body is too large.")
    elif isinstance(exc, exceptions.ParseError):
        exc = ApiError(400, "malformed_json", f"The body is not valid JSON: {exc.detail}")
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ApiError):
        response.data = error_body(exc.error_code, str(exc.detail), exc.fields)
        for name, value in exc.headers.items():
            response[name] = value
    elif isinstance(exc, exceptions.ValidationError):
        response.data = error_body("invalid", "The request is invalid.", _flatten(exc.detail))
    else:
        detail = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
        message = detail if isinstance(detail, str) else str(detail)
        response.data = error_body(_CODES.get(response.status_code, "error"), message)
    return response


def _flatten(detail, path: str = "") -> list[dict]:
    if isinstance(detail, dict):
        return [
            item for key, value in detail.items() for item in _flatten(value, _child(path, key))
        ]
    if isinstance(detail, list):
        if all(not isinstance(v, dict | list) for v in detail):
            return [{"path": path or "(body)", "message": str(v)} for v in detail]
        return [item for i, value in enumerate(detail) for item in _flatten(value, f"{path}[{i}]")]
    return [{"path": path or "(body)", "message": str(detail)}]


def _child(path: str, key: object) -> str:
    # DRF reports a list's bad items under their index: name them as the upload errors do.
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def json_error(status_code: int, code: str, message: str, **headers: str) -> JsonResponse:
    """The same shape from plain Django views (the legacy endpoint, middleware)."""
    response = JsonResponse(error_body(code, message), status=status_code)
    for name, value in headers.items():
        response.headers[name.replace("_", "-")] = value
    return response


def answers_in_json(request: HttpRequest) -> bool:
    """Whether error pages for this URL take the API's JSON error shape (the legacy /submit
    endpoint included)."""
    return request.path.startswith("/api/") or request.path == "/submit"


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404: an unknown API URL answers in the API's error shape, pages get the page."""
    if answers_in_json(request):
        return json_error(404, "not_found", "Not found.")
    return defaults.page_not_found(request, exception)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400 (a Host header not in ALLOWED_HOSTS, a malformed request), the same way."""
    if answers_in_json(request):
        return json_error(400, "bad_request", "The request is malformed.")
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler403 for plain Django views (DRF answers its own 403s), the same way."""
    if answers_in_json(request):
        return json_error(403, "forbidden", "You do not have permission to do this.")
    return defaults.permission_denied(request, exception)


ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "fields": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["path", "message"],
                        "properties": {"path": {"type": "string"}, "message": {"type": "string"}},
                    },
                },
            },
        }
    },
}
_ERROR_DESCRIPTIONS = {
    "400": "invalid request",
    "401": "no or bad API key",
    "404": "not found",
    "413": "body too large",
    "415": "body is not JSON",
    "429": "throttled",
}


def document_errors(result: dict, generator, request, public) -> dict:
    """drf-spectacular hook: every operation lists the errors it can answer with, in the one
    error shape, so clients (and the schemathesis run in the tests) can rely on the schema."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path, item in result["paths"].items():
        for operation in item.values():
            codes = {"429"}
            if operation.get("parameters") or "requestBody" in operation:
                codes.add("400")
            if "requestBody" in operation:
                codes |= {"413", "415"}
            if any("ApiKey" in requirement for requirement in operation.get("security", [])):
                codes.add("401")  # a wrong key is refused even where no key is needed
            if "{" in path:
                codes.add("404")
            responses = operation["responses"]
            for code in codes:
                responses.setdefault(code, {"description": _ERROR_DESCRIPTIONS[code]})
            for code, response in responses.items():
                if code.startswith("4"):
                    response.setdefault("content", content)
    return result


__all__ = [
    "ApiError",
    "api_exception_handler",
    "document_errors",
    "error_body",
    "bad_request",
    "json_error",
    "not_found",
    "permission_denied",
]
