"""Upload and device-login endpoints (DRF). Each view validates, calls a service, serialises."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ApiError
from core.formlimits import client_address
from core.links import absolute_url
from core.throttling import AnonThrottle, UserThrottle
from core.unavailable import NOTHING_SAVED, unavailable_response
from runs.importers import FormatError, UnsupportedVersion
from runs.importers.records import Unstorable, load_json
from runs.importers.upgrade import UpgradedRun, check_versions, upgrade
from runs.limits import schema_errors, upload_schema_bytes
from runs.models import Run
from submissions import keys
from submissions.models import Channel, Submission, UploadAttempt
from submissions.permissions import scope_required
from submissions.services import (
    DEVICE_CODE_LIFETIME,
    DeviceTokenError,
    SubmissionConflict,
    UploadOutcome,
    poll_device_token,
    start_device_authorization,
    submit_run,
)
from worker.rules.logcontext import bind_log_context, log_context

DEVICE_CODE_LIFETIME_SECONDS = int(DEVICE_CODE_LIFETIME.total_seconds())


class UploadThrottle(UserThrottle):
    scope = "upload"


class LegacySubmitThrottle(AnonThrottle):
    scope = "legacy_submit"


class DeviceThrottle(AnonThrottle):
    scope = "device"


class DeviceTokenThrottle(AnonThrottle):
    scope = "device_token"


def read_json_body(request: Request) -> dict:
    """The body as a JSON object, with every way it can be wrong mapped to a 4xx ApiError."""
    limit = settings.BENCHLOOP_MAX_UPLOAD_BYTES
    too_large = ApiError(413, "payload_too_large", f"The body is larger than {limit} bytes.")
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit:
        raise too_large
    try:
        raw = request._request.body  # Django enforces DATA_UPLOAD_MAX_MEMORY_SIZE here
    except RequestDataTooBig:
        raise too_large from None
    if len(raw) > limit:
        raise too_large
    content_type = request.META.get("CONTENT_TYPE", "").split(";")[0].strip()
    if content_type not in ("application/json", ""):
        raise ApiError(415, "unsupported_media_type", "Send the run as application/json.")
    try:
        # The importers' strict reader: NaN and Infinity are refused, positions are reported,
        # and what no database can store (NUL, lone surrogates, 1e999, deep nesting) is named.
        data = load_json(raw.decode("utf-8"), position="line {line} column {column}")
    except UnicodeDecodeError:
        raise ApiError(400, "malformed_json", "The body is not UTF-8.") from None
    except Unstorable as exc:
        raise ApiError(
            400, "invalid", exc.message, [{"path": exc.position, "message": exc.message}]
        ) from None
    except FormatError as exc:
        raise ApiError(400, "malformed_json", f"The body is not valid JSON: {exc}.") from None
    if not isinstance(data, dict):
        raise ApiError(
            400,
            "invalid",
            "The body must be a JSON object.",
            [{"path": "(body)", "message": "expected an object"}],
        )
    return data


def validate_upload(data: dict) -> UpgradedRun:
    """422 for unknown majors, 400 with every failing path for schema violations; else what
    upgrade(data) returns, for submit_run."""
    try:
        check_versions(data)
        upgraded = upgrade(data)
    except UnsupportedVersion as exc:
        raise ApiError(
            422,
            "unsupported_version",
            exc.message,
            [{"path": exc.position, "message": exc.message}],
        ) from None
    except FormatError as exc:
        raise ApiError(
            400, "invalid", exc.message, [{"path": exc.position, "message": exc.message}]
        ) from None
    errors = schema_errors(upgraded.bundle)
    if errors:
        prefix = "run." if upgraded.original_format == "envelope-v3" else ""
        for error in errors:
            if error["path"] != "(body)":
                error["path"] = prefix + error["path"]
        raise ApiError(400, "invalid", "The run does not match the upload schema.", errors)
    visibility = data.get("visibility", "public")
    if upgraded.original_format == "envelope-v3" and visibility not in (
        "public",
        "unlisted",
        "private",
    ):
        raise ApiError(
            400,
            "invalid",
            "Unknown visibility.",
            [
                {
                    "path": "visibility",
                    "message": f"{str(visibility)[:40]!r} is not one of public, unlisted, private",
                }
            ],
        )
    return upgraded


# The commit's answer was lost with the connection, and no other one could check.
MAYBE_SAVED = (
    "The database is unavailable right now and this upload may have been stored. Send it again "
    "in a few seconds: an upload with the same client run id is never stored twice."
)


def _store(
    request: Request, data: dict, answer: Callable[[UploadOutcome], dict], **kwargs
) -> dict | HttpResponse:
    """Store an upload and build its answer in one transaction, so the answer is complete
    before the commit and nothing after it can turn a stored run into an error.

    When the database goes away the 503 says what is true: before the commit, the transaction
    was rolled back and nothing was saved; when the commit itself failed, a new connection
    looks for the run, and a stored run gets its answer after all.
    """
    upgraded = validate_upload(data)  # CPU only: no transaction (nor SQLite's lock) needed
    # The ids go on the lines of the commit too (what runs on it, an outage's answer), which
    # come after submit_run's own binding has ended.
    with log_context(client_run_id=upgraded.bundle.get("client_run_id") or None):
        outcome, body = None, None
        try:
            with transaction.atomic():
                outcome = _submit(data, upgraded, **kwargs)
                submission = outcome.submission
                bind_log_context(client_run_id=submission.client_run_id, run_id=submission.run_id)
                body = answer(outcome)
        except (OperationalError, InterfaceError) as exc:
            if outcome is None or body is None:  # raised inside the transaction: rolled back
                return unavailable_response(request._request, exc, NOTHING_SAVED)
            if outcome.created:
                stored = _stored(outcome.submission.pk)
                if stored is None:
                    return unavailable_response(request._request, exc, MAYBE_SAVED)
                if not stored:
                    return unavailable_response(request._request, exc, NOTHING_SAVED)
            # Stored (or a repeat, which wrote nothing): the answer built before the commit holds.
        return body


def _stored(submission_id: int) -> bool | None:
    """Whether the submission exists, asked on a new connection; None if none can be had."""
    try:
        connection.close()  # the connection whose commit failed
        return Submission.objects.filter(pk=submission_id).exists()
    except DatabaseError:
        return None


def _submit(data: dict, upgraded: UpgradedRun, **kwargs) -> UploadOutcome:
    try:
        return submit_run(payload=data, upgraded=upgraded, **kwargs)
    except UnsupportedVersion as exc:
        raise ApiError(422, "unsupported_version", exc.message) from None
    except FormatError as exc:
        raise ApiError(
            400, "invalid", exc.message, [{"path": exc.position, "message": exc.message}]
        ) from None
    except SubmissionConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from None


class RunUploadView(APIView):
    """POST /api/v1/runs: upload a run bundle or a v3 publish envelope (API key, submit scope)."""

    permission_classes = [scope_required("submit")]
    throttle_classes = [UploadThrottle]

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        url = serializers.URLField(help_text="the run's page, absolute")
        client_run_id = serializers.CharField()
        status = serializers.CharField(help_text="pending and flagged runs wait for a moderator")
        published = serializers.BooleanField(help_text="on the public leaderboard now")
        flag_reasons = serializers.ListField(child=serializers.CharField())
        duplicate = serializers.BooleanField()
        attempts = serializers.IntegerField(help_text="uploads by you for this stack (best-of-N)")

    @extend_schema(
        request=inline_serializer("RunUpload", {"run": serializers.DictField(required=False)}),
        responses={
            201: OutputSerializer,
            200: OutputSerializer,
            400: OpenApiResponse(description="malformed JSON or schema violations"),
            401: OpenApiResponse(description="no or bad API key"),
            403: OpenApiResponse(description="key lacks the submit scope"),
            409: OpenApiResponse(description="another account owns this run"),
            413: OpenApiResponse(description="body too large"),
            422: OpenApiResponse(description="unknown schema major version"),
            429: OpenApiResponse(description="throttled"),
        },
    )
    def post(self, request: Request) -> Response | HttpResponse:
        data = read_json_body(request)

        def answer(outcome: UploadOutcome) -> dict:
            code = status.HTTP_201_CREATED if outcome.created else status.HTTP_200_OK
            return {"code": code, "data": self.OutputSerializer(_upload_result(outcome)).data}

        body = _store(
            request,
            data,
            answer,
            channel=Channel.API_KEY,
            submitter=request.user,
            api_key=request.auth,
        )
        if isinstance(body, HttpResponse):
            return body
        return Response(body["data"], status=body["code"])


def _upload_result(outcome: UploadOutcome) -> dict:
    submission = outcome.submission
    # A repeat's run is not loaded (its stored payload is large): ask for what is shown only.
    if Submission.run.is_cached(submission):
        stack_id, published = submission.run.stack_id, submission.run.published
    else:
        run = Run.objects.filter(pk=submission.run_id).values_list("stack_id", "published")
        stack_id, published = run.get()
    attempts = UploadAttempt.objects.filter(stack_id=stack_id, submitter_id=submission.submitter_id)
    if submission.submitter_id is None:
        attempts = attempts.filter(anonymous_key=submission.uploader_key)
    return {
        "id": submission.run_id,
        "url": absolute_url(reverse("leaderboard:run", args=[submission.run_id])),
        "client_run_id": submission.client_run_id,
        "status": submission.status,
        "published": published,
        "flag_reasons": submission.flag_reasons,
        "duplicate": outcome.duplicate,
        "attempts": attempts.count(),
    }


class LegacySubmitView(APIView):
    """POST /submit: the anonymous path of benchloop-cli ≤ 0.2.3. Always moderated."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [LegacySubmitThrottle]

    @extend_schema(
        request=inline_serializer("LegacyRun", {"model": serializers.DictField()}),
        responses={
            200: inline_serializer(
                "LegacyAccepted",
                {"status": serializers.CharField(), "id": serializers.IntegerField()},
            )
        },
    )
    def post(self, request: Request) -> Response | HttpResponse:
        data = read_json_body(request)
        # Behind the proxy, the client's address (NUM_PROXIES), not the proxy's: the same
        # helper the throttles use, so the key and the rate limit name the same uploader.
        address = client_address(request._request)
        body = _store(
            request,
            data,
            lambda outcome: {"status": outcome.submission.status, "id": outcome.submission.run_id},
            channel=Channel.LEGACY_ANONYMOUS,
            submitter=None,
            uploader_key=keys.keyed_hash(address, purpose="uploader"),
        )
        # The old client only checks for HTTP 200.
        return body if isinstance(body, HttpResponse) else Response(body)


class DeviceStartView(APIView):
    """POST /api/v1/device/start: begin `benchloop login`."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [DeviceThrottle]

    @extend_schema(
        request=inline_serializer(
            "DeviceStart", {"client_name": serializers.CharField(required=False)}
        ),
        responses={
            200: inline_serializer(
                "DeviceCode",
                {
                    "device_code": serializers.CharField(),
                    "user_code": serializers.CharField(),
                    "verification_uri": serializers.CharField(),
                    "verification_uri_complete": serializers.CharField(),
                    "expires_in": serializers.IntegerField(),
                    "interval": serializers.IntegerField(),
                },
            )
        },
    )
    def post(self, request: Request) -> Response:
        # The body is optional: a bare POST starts a login too.
        data = read_json_body(request) if request.content_type == "application/json" else {}
        name = data.get("client_name", "")
        auth, device_code = start_device_authorization(
            client_name=name if isinstance(name, str) else ""
        )
        uri = request.build_absolute_uri("/device/")
        return Response(
            {
                "device_code": device_code,
                "user_code": auth.user_code,
                "verification_uri": uri,
                "verification_uri_complete": f"{uri}?code={auth.user_code}",
                "expires_in": DEVICE_CODE_LIFETIME_SECONDS,
                "interval": auth.interval,
            }
        )


# RFC 8628 section 3.4: the grant type a device access token request names.
DEVICE_GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
# RFC 8628 section 3.5 and RFC 6749 section 5.2: what a poll may answer with a 400.
DEVICE_TOKEN_ERRORS = [
    "authorization_pending",
    "slow_down",
    "access_denied",
    "expired_token",
    "invalid_grant",
    "invalid_request",
    "unsupported_grant_type",
]
FORM = "application/x-www-form-urlencoded"


def _oauth_error(code: str, description: str, retry_after: int = 0) -> Response:
    """RFC 6749 section 5.2's error answer: 400, {"error", "error_description"}, not cached."""
    response = Response({"error": code, "error_description": description}, status=400)
    response["Cache-Control"] = "no-store"
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


def _poll_parameters(request: Request) -> dict | Response:
    """The poll's parameters: form-encoded as RFC 8628 sends them, or a JSON object as the CLI
    sent them before (and still does, so that it works with older sites). A body that is
    neither is an invalid_request."""
    content_type = request.META.get("CONTENT_TYPE", "").split(";")[0].strip()
    if content_type not in (FORM, "application/json", ""):
        raise ApiError(415, "unsupported_media_type", f"Send the poll as {FORM} or JSON.")
    if content_type == FORM:
        return request._request.POST.dict()
    try:
        return read_json_body(request)
    except ApiError as exc:
        if exc.status_code != 400:
            raise
        return _oauth_error("invalid_request", str(exc.detail))


class DeviceTokenView(APIView):
    """POST /api/v1/device/token: the CLI's poll for its key (RFC 8628 section 3.4)."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    # Per address, over all device codes: slow_down paces one code, this paces a client.
    throttle_classes = [DeviceTokenThrottle]

    @extend_schema(
        description=(
            "RFC 8628's device access token request, form-encoded "
            f"(grant_type={DEVICE_GRANT_TYPE}&device_code=…) or as a JSON object. "
            "Until the login is approved it answers 400 with error authorization_pending, "
            "or slow_down when polled faster than the interval (which grows by 5 s); "
            "access_denied once the user denied it, expired_token after 10 minutes."
        ),
        request={
            FORM: inline_serializer(
                "DeviceTokenRequest",
                {
                    "grant_type": serializers.ChoiceField(choices=[DEVICE_GRANT_TYPE]),
                    "device_code": serializers.CharField(),
                },
            ),
            "application/json": inline_serializer(
                "DevicePoll",
                {
                    "grant_type": serializers.ChoiceField(
                        choices=[DEVICE_GRANT_TYPE], required=False
                    ),
                    "device_code": serializers.CharField(),
                },
            ),
        },
        responses={
            200: inline_serializer(
                "DeviceKey",
                {
                    "access_token": serializers.CharField(),
                    "token_type": serializers.ChoiceField(choices=["Bearer"]),
                    "scope": serializers.CharField(),
                    "api_key": serializers.CharField(help_text="the access token (older CLIs)"),
                    "scopes": serializers.ListField(child=serializers.CharField()),
                },
            ),
            400: inline_serializer(
                "DeviceTokenError",
                {
                    "error": serializers.ChoiceField(choices=DEVICE_TOKEN_ERRORS),
                    "error_description": serializers.CharField(),
                },
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = _poll_parameters(request)
        if isinstance(data, Response):
            return data
        grant_type, device_code = data.get("grant_type"), data.get("device_code")
        if grant_type is not None and grant_type != DEVICE_GRANT_TYPE:
            return _oauth_error(
                "unsupported_grant_type", f"grant_type must be {DEVICE_GRANT_TYPE}."
            )
        if not isinstance(device_code, str) or not device_code or len(device_code) > 200:
            return _oauth_error("invalid_request", "device_code is required.")
        try:
            api_key = poll_device_token(device_code=device_code)
        except DeviceTokenError as exc:
            return _oauth_error(exc.code, str(exc), exc.retry_after)
        scopes = ["read", "submit"]
        response = Response(
            {
                "access_token": api_key,
                "token_type": "Bearer",
                "scope": " ".join(scopes),
                "api_key": api_key,
                "scopes": scopes,
            }
        )
        response["Cache-Control"] = "no-store"
        return response


class UploadSchemaView(APIView):
    """GET /api/v1/schemas/upload-1.json: the published upload JSON Schema."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(responses={200: OpenApiResponse(description="JSON Schema, draft 2020-12")})
    def get(self, request: Request) -> HttpResponse:
        response = HttpResponse(upload_schema_bytes(), content_type="application/schema+json")
        response["Cache-Control"] = "public, max-age=3600"
        return response
