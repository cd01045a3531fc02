"""POST /api/v1/runs/external: a results file another tool wrote (llama-bench, llama-benchy),
sent as it is by `benchloop submit --from FILE`. The view reads the body and serialises the
answer; submissions.external parses, checks and stores."""

from __future__ import annotations

from django.db import InterfaceError, OperationalError, transaction
from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ApiError
from core.links import absolute_url
from core.unavailable import NOTHING_SAVED, unavailable_response
from runs import bounds
from runs.importers.external import NeedsHardware
from runs.importers.records import FormatError, HardwareRecord, Node, RunRecord
from runs.models import Run, Stack, TaskResult
from submissions.api import MAYBE_SAVED, UploadThrottle, _stored, read_json_body
from submissions.external import (
    HARDWARE_SOURCES,
    MAX_FILENAME,
    ExternalUpload,
    parse_upload,
    read_hardware,
    submit_external,
)
from submissions.permissions import KeyRequest, scope_required
from submissions.services import SubmissionConflict, UploadOutcome


class ExternalRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.URLField(help_text="the run's page, absolute")
    status = serializers.CharField(help_text="pending and flagged runs wait for a moderator")
    published = serializers.BooleanField(help_text="on the public leaderboard now")
    flag_reasons = serializers.ListField(child=serializers.CharField())
    method = serializers.CharField(help_text="how the speeds were measured: llama-bench, …")
    stack = serializers.CharField(help_text="the stack's label, told apart from the file's others")
    hardware = serializers.CharField(help_text="the machine's class label; empty when unknown")
    hardware_source = serializers.CharField(help_text="file, submitter or override")
    cells = serializers.ListField(child=serializers.CharField(), help_text="the run's tasks")
    duplicate = serializers.BooleanField(help_text="already on the site: nothing new stored")


class ExternalAnswerSerializer(serializers.Serializer):
    runs = ExternalRunSerializer(many=True)
    hardware_source = serializers.CharField(help_text="where the runs' machine came from")
    duplicate = serializers.BooleanField(help_text="every run was on the site already")


class ExternalUploadView(APIView):
    """POST /api/v1/runs/external: a llama-bench or llama-benchy output file (API key, submit
    scope, the bundle upload's throttle). All of the file's runs are stored, or none."""

    permission_classes = [scope_required("submit")]
    throttle_classes = [UploadThrottle]

    @extend_schema(
        request=inline_serializer(
            "ExternalUploadRequest",
            {
                "filename": serializers.CharField(help_text="the file's name, for its format"),
                "content": serializers.CharField(help_text="the file's text, whole"),
                "hardware": serializers.JSONField(
                    required=False,
                    allow_null=True,
                    help_text="for a file that names no machine: {cpu, gpu, gpu_count, "
                    'vram_gb, ram_gb, os}, or words such as "RTX 4090 24 GB"',
                ),
                "hardware_source": serializers.ChoiceField(
                    choices=HARDWARE_SOURCES, required=False
                ),
            },
        ),
        responses={
            201: ExternalAnswerSerializer,
            200: ExternalAnswerSerializer,
            400: OpenApiResponse(description="bad_file (with the position), or invalid body"),
            401: OpenApiResponse(description="no or bad API key"),
            403: OpenApiResponse(description="key lacks the submit scope"),
            409: OpenApiResponse(description="another account owns one of the runs"),
            413: OpenApiResponse(description="body too large"),
            415: OpenApiResponse(description="not application/json"),
            422: OpenApiResponse(description="needs_hardware: the file names no machine"),
            429: OpenApiResponse(description="throttled"),
        },
    )
    def post(self, request: KeyRequest) -> Response | HttpResponse:
        filename, content, hardware, source = _read_body(read_json_body(request))
        records = _parse(content, filename=filename, hardware=hardware, source=source)
        upload, answer = None, None
        try:
            with transaction.atomic():
                upload = _store(records, request)
                answer = _answer(upload)  # before the commit: nothing after it can fail
        except (OperationalError, InterfaceError) as exc:
            if upload is None or answer is None:  # raised inside the transaction: rolled back
                return unavailable_response(request._request, exc, NOTHING_SAVED)
            first = next(o for o in upload.outcomes if o.created) if upload.created else None
            if first is not None:
                stored = _stored(first.submission.pk)
                if not stored:
                    why = MAYBE_SAVED if stored is None else NOTHING_SAVED
                    return unavailable_response(request._request, exc, why)
        code = status.HTTP_201_CREATED if upload.created else status.HTTP_200_OK
        return Response(ExternalAnswerSerializer(answer).data, status=code)


def _read_body(data: dict) -> tuple[str, str, HardwareRecord | None, str]:
    """(filename, content, hardware, hardware_source), or a 400 naming the field."""
    body = Node(data)
    try:
        filename = body.get("filename", required=False).str(max_length=MAX_FILENAME)
        content = body.get("content").str(max_length=2**31, kind=bounds.RAW)
        hardware = read_hardware(body.get("hardware", required=False))
        source = body.get("hardware_source", required=False).str(default="submitter")
    except FormatError as exc:
        raise _invalid(exc.position, exc.message) from None
    if source not in HARDWARE_SOURCES:
        raise _invalid("hardware_source", f"{source[:40]!r} is not one of submitter, override")
    return filename, content, hardware, source


def _invalid(path: str, message: str) -> ApiError:
    return ApiError(400, "invalid", f"{path}: {message}", [{"path": path, "message": message}])


def _parse(
    content: str, *, filename: str, hardware: HardwareRecord | None, source: str
) -> list[RunRecord]:
    try:
        return parse_upload(content, filename=filename, hardware=hardware, hardware_source=source)
    except NeedsHardware as exc:
        raise ApiError(
            422, "needs_hardware", str(exc), [{"path": "hardware", "message": str(exc)}]
        ) from None
    except FormatError as exc:
        raise _bad_file(exc) from None


def _bad_file(exc: FormatError) -> ApiError:
    """400 bad_file: the sentence, and the line or field it is about (the upload's 400s name
    theirs the same way, in `fields`)."""
    where = exc.position or "(file)"
    return ApiError(400, "bad_file", str(exc), [{"path": where, "message": exc.message}])


def _store(records: list[RunRecord], request: KeyRequest) -> ExternalUpload:
    try:
        return submit_external(records, submitter=request.user, api_key=request.auth)
    except SubmissionConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    except FormatError as exc:  # a value no column holds: runs.limits names it
        raise _bad_file(exc) from None


def _answer(upload: ExternalUpload) -> dict:
    """Each run as stored (a repeat's as it was stored first), in the file's order."""
    ids = [outcome.submission.run_id for outcome in upload.outcomes]
    runs = Run.objects.select_related("stack", "hardware_class").in_bulk(ids)
    tasks: dict[int, list[str]] = {}
    for run_id, task_id in (
        TaskResult.objects.filter(suite_result__run_id__in=ids)
        .order_by("suite_result_id", "id")
        .values_list("suite_result__run_id", "task_id")
    ):
        tasks.setdefault(run_id, []).append(task_id)
    # The file's runs side by side: labels that tell them apart (threads 1 and threads 2).
    stacks = {run.stack_id: run.stack for run in runs.values()}
    labels = dict(zip(stacks, Stack.distinct_labels(list(stacks.values())), strict=True))
    answers = [
        _run_answer(record, outcome, runs[outcome.submission.run_id], tasks, labels)
        for record, outcome in zip(upload.records, upload.outcomes, strict=True)
    ]
    sources = {answer["hardware_source"] for answer in answers}
    return {
        "runs": answers,
        "hardware_source": sources.pop() if len(sources) == 1 else "mixed",
        "duplicate": not upload.created,
    }


def _run_answer(
    record: RunRecord,
    outcome: UploadOutcome,
    run: Run,
    tasks: dict[int, list[str]],
    labels: dict[int, str],
) -> dict:
    submission = outcome.submission
    provenance = run.provenance if isinstance(run.provenance, dict) else {}
    return {
        "id": run.pk,
        "url": absolute_url(reverse("leaderboard:run", args=[run.pk])),
        "status": submission.status,
        "published": run.published,
        "flag_reasons": submission.flag_reasons,
        "method": run.method,
        "stack": labels[run.stack_id],
        "hardware": run.hardware_class.label if run.hardware_class is not None else "",
        # A repeat keeps the machine it was stored with, and says where that one came from.
        "hardware_source": str(provenance.get("hardware_source") or record.hardware_source),
        "cells": tasks.get(run.pk, []),
        "duplicate": not outcome.created,
    }
