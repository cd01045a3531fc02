"""POST /api/v1/jobs (lab operators) and GET /api/v1/jobs/{id} (public job state)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ApiError
from core.throttling import AnonThrottle, UserThrottle
from lab import services
from lab.access import can_operate
from lab.forms import JobForm
from lab.models import BenchmarkJob
from runs import bounds, limits
from runs.models import SuiteResult, TaskResult
from submissions.permissions import KeyRequest, scope_required
from worker.rules.harnesses import HARNESSES, canonical
from worker.rules.reasoning import MAX_TOKENS_CEILING
from worker.rules.redact import redact_text


class IsLabOperator(BasePermission):
    message = "Only lab operators can queue jobs."

    def has_permission(self, request, view) -> bool:
        return can_operate(request.user)


class JobOutput(serializers.ModelSerializer):
    """A job's state; its text is redacted for anyone but its requester and lab operators."""

    url = serializers.SerializerMethodField()
    host = serializers.CharField(source="host.name", default=None, allow_null=True)
    run_url = serializers.SerializerMethodField()

    class Meta:
        model = BenchmarkJob
        fields = [
            "id",
            "url",
            "status",
            "model",
            "pool",
            "priority",
            "profile",
            "suites",
            "tasks",
            "trials",
            "max_tokens",
            "thinking_budget",
            "harness",
            "harness_variant",
            "target",
            "attempts",
            "host",
            "created_at",
            "claimed_at",
            "started_at",
            "finished_at",
            "total_tasks",
            "completed_tasks",
            "current_suite",
            "current_task",
            "error",
            "run_url",
        ]

    def get_url(self, job: BenchmarkJob) -> str:
        return f"/lab/jobs/{job.pk}/"

    def to_representation(self, job: BenchmarkJob) -> dict:
        """Everyone but the job's requester and lab operators gets its text redacted: an
        endpoint's own error message can name the endpoint's address."""
        data = super().to_representation(job)
        request = self.context.get("request")
        if not job.shows_raw_text_to(getattr(request, "user", None)):
            for name in ("model", "profile", "host", "current_suite", "current_task", "error"):
                if data.get(name) is not None:
                    data[name] = redact_text(data[name])
            for name in ("suites", "tasks"):
                data[name] = [redact_text(item) for item in data.get(name) or []]
        return data

    def get_run_url(self, job: BenchmarkJob) -> str | None:
        return f"/runs/{job.run_id}/" if job.run_id else None


def _one_line(value: str) -> None:
    problem = bounds.text_problem(value)
    if problem:
        raise serializers.ValidationError(f"This value {problem}.")


def _names(max_length: int, count: int) -> serializers.ListField:
    child = serializers.CharField(max_length=max_length, validators=[_one_line])
    return serializers.ListField(child=child, required=False, max_length=count, default=list)


class _HarnessField(serializers.ChoiceField):
    """A harness by its current name, or by a prompt format's old one (``hermes``, ``qwen``,
    ``pi``), as scripts written for an earlier site still send."""

    def to_internal_value(self, data: object) -> str:
        # DRF looks any JSON value up by str(data) (refusing what names no choice); the stubs
        # name fewer types.
        named = canonical(data) if isinstance(data, str) else data
        return str(super().to_internal_value(named))  # type: ignore[arg-type]


class JobInput(serializers.ModelSerializer):
    """The job's fields as the model defines them (lengths, ranges, the pool and key-name
    patterns), narrowed where the API offers fewer choices than the column holds."""

    endpoint_url = serializers.URLField(
        required=False, allow_blank=True, max_length=limits.max_length(BenchmarkJob, "endpoint_url")
    )
    launch_flags = _names(200, 50)
    suites = _names(limits.max_length(SuiteResult, "suite"), 20)
    tasks = _names(limits.max_length(TaskResult, "task_id"), 100)
    harness = _HarnessField(choices=list(HARNESSES), default="raw")
    host = serializers.CharField(
        required=False,
        allow_blank=True,
        write_only=True,
        max_length=100,
        help_text="Run on this lab host (its own queue), e.g. for a server it reported; "
        "instead of a pool.",
    )

    class Meta:
        model = BenchmarkJob
        # The form's fields, and the lists that the form takes as text.
        fields = [*JobForm.Meta.fields, "launch_flags", "suites", "tasks", "host"]
        extra_kwargs = {
            "context_length": {"min_value": 256, "max_value": 10_000_000},
            "threads": {"min_value": 1, "max_value": 512},
            "trials": {"min_value": 1, "max_value": 50},
            "max_tokens": {"min_value": 1, "max_value": MAX_TOKENS_CEILING},
            "thinking_budget": {"min_value": 0, "max_value": MAX_TOKENS_CEILING},
            "priority": {"min_value": 0, "max_value": 9},
        }

    def validate(self, attrs: dict) -> dict:
        """Where the job runs, by the rule the new-job form follows (services.place_job)."""
        host_name = attrs.pop("host", "")
        if not host_name:
            attrs.setdefault("pool", BenchmarkJob._meta.get_field("pool").default)
        try:
            placement = services.place_job(fields=attrs, host_name=host_name)
        except ValidationError as exc:
            raise serializers.ValidationError(
                {"host" if f == "server" else f: m for f, m in exc.message_dict.items()}
            ) from None
        self.warning = placement.warning
        return placement.fields


class JobQueueView(APIView):
    """Queue a benchmark job on a host pool; answers 202 with the job's URL."""

    permission_classes = [scope_required("submit"), IsLabOperator]
    throttle_classes = [UserThrottle]

    @extend_schema(
        request=JobInput,
        responses={
            202: JobOutput,
            400: OpenApiResponse(description="invalid job"),
            401: OpenApiResponse(description="no key"),
            403: OpenApiResponse(description="not a lab operator"),
        },
    )
    def post(self, request: KeyRequest) -> Response:
        from submissions.api import read_json_body

        data = JobInput(data=read_json_body(request))
        data.is_valid(raise_exception=True)
        try:
            job = services.queue_job(requested_by=request.user, **data.validated_data)
        except ValidationError as exc:
            raise ApiError(
                400,
                "invalid",
                "The job is invalid.",
                [
                    {"path": field, "message": " ".join(messages)}
                    for field, messages in exc.message_dict.items()
                ],
            ) from None
        body = dict(JobOutput(job, context={"request": request}).data)
        if data.warning:
            body["warning"] = data.warning
        return Response(body, status=202, headers={"Location": body["url"]})


class JobDetailView(APIView):
    """A job's public state and progress."""

    permission_classes = [AllowAny]
    throttle_classes = [AnonThrottle, UserThrottle]

    @extend_schema(responses=JobOutput)
    def get(self, request: Request, pk: int) -> Response:
        job = get_object_or_404(BenchmarkJob.objects.select_related("host"), pk=pk)
        return Response(JobOutput(job, context={"request": request}).data)
