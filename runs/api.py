"""The public read API (DRF): leaderboard, stacks, runs and hardware. Published runs only."""

from __future__ import annotations

import statistics

from django.db.models import Count, Prefetch, Q, prefetch_related_objects
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchloop_site.throttling import AnonThrottle, UserThrottle
from leaderboard import public
from runs.models import Hardware, Run, Stack, SuiteResult, TaskResult
from submissions.errors import ApiError
from submissions.models import UploadAttempt
from submissions.permissions import scope_required
from submissions.services import delete_run

READ_THROTTLES = [AnonThrottle, UserThrottle]
SPEED_FIELDS = [
    f"{m}_{s}"
    for m in ("decode_tps", "prefill_tps", "ttft_ms")
    for s in ("median", "mean", "stdev", "p5", "p95", "peak")
]


class HardwareSerializer(serializers.ModelSerializer):
    label = serializers.CharField()

    class Meta:
        model = Hardware
        fields = [
            "id",
            "label",
            "gpu_vendor",
            "gpu_model",
            "gpu_count",
            "vram_gb",
            "vram_bucket",
            "cpu_model",
            "ram_gb",
            "ram_bucket",
            "os",
            "accelerator",
        ]


class HardwareRowSerializer(HardwareSerializer):
    """A row of GET /api/v1/hardware (documents the run count the view adds)."""

    run_count = serializers.IntegerField(help_text="approved runs on this machine class")

    class Meta(HardwareSerializer.Meta):
        fields = [*HardwareSerializer.Meta.fields, "run_count"]


class StackSerializer(serializers.ModelSerializer):
    key = serializers.CharField(source="short_key")
    launch_settings = serializers.SerializerMethodField()

    class Meta:
        model = Stack
        fields = [
            "id",
            "key",
            "model_id",
            "model_family",
            "params_b",
            "quantization",
            "model_sha256",
            "engine",
            "harness",
            "context_length",
            "kv_cache_type",
            "draft_model",
            "launch_settings",
            "published_run_count",
            "submitter_count",
        ]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_launch_settings(self, stack: Stack) -> dict:
        # The same settings the stack page shows: none that locate or unlock a host.
        return public.public_launch_settings(stack.launch_settings)


class RunSummarySerializer(serializers.ModelSerializer):
    """Every public field of a run; nothing a submitter's machine or network could be traced by."""

    stack = StackSerializer()
    hardware = HardwareSerializer(allow_null=True)
    submitter = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = [
            "id",
            "url",
            "stack",
            "hardware",
            "submitter",
            "score_scale",
            "score_schema_version",
            "benchmark_version",
            "profile",
            "requested_profile",
            "manifest_hash",
            "coverage_score",
            "comparable",
            "scoring_mode",
            "is_verified",
            "is_demo",
            "overall_score",
            "quality_score",
            "speed_score",
            "reliability_score",
            "value_score",
            *SPEED_FIELDS,
            "speed_sample_count",
            "engine_version",
            "harness_version",
            "started_at",
            "total_runtime_sec",
        ]

    def get_submitter(self, run: Run) -> str:
        return run.submission.display_submitter

    def get_url(self, run: Run) -> str:
        return f"/runs/{run.pk}/"


class TaskSerializer(serializers.ModelSerializer):
    class Meta:
        model = TaskResult
        fields = [
            "task_id",
            "passed",
            "score",
            "latency_ms",
            "tokens_generated",
            "tokens_prompt",
            "execution_ok",
            "finish_reason",
        ]


class SuiteSerializer(serializers.ModelSerializer):
    tasks = TaskSerializer(many=True)

    class Meta:
        model = SuiteResult
        fields = [
            "suite",
            "score",
            "task_count",
            "pass_count",
            "fail_count",
            "median_latency_ms",
            "tasks",
        ]


class RunDetailSerializer(RunSummarySerializer):
    suites = SuiteSerializer(many=True, source="suite_results")
    attempts = serializers.SerializerMethodField(
        help_text="uploads by this submitter for the stack (best-of-N)"
    )

    class Meta(RunSummarySerializer.Meta):
        fields = [*RunSummarySerializer.Meta.fields, "suites", "attempts"]

    def get_attempts(self, run: Run) -> int:
        submission = run.submission
        if submission.submitter_id is None:
            return 1
        return UploadAttempt.objects.filter(
            stack_id=run.stack_id, submitter_id=submission.submitter_id
        ).count()


def _public_runs():
    return Run.objects.published().select_related("stack", "hardware", "submission__submitter")


FILTER_PARAMETERS = [
    OpenApiParameter(name, str, description=text)
    for name, text in [
        ("scale", "v3 (default), v2 or speed"),
        ("mode", "best (default) or median"),
        ("q", "free text"),
        ("vendor", "nvidia, amd, apple, intel"),
        ("gpu", "GPU model"),
        ("vram", "VRAM bucket"),
        ("ram", "RAM bucket"),
        ("cpu", "1: CPU only"),
        ("apple", "1: Apple Silicon"),
        ("engine", "engine"),
        ("quant", "quantization"),
        ("family", "model family"),
        ("params", "parameter bucket"),
        ("harness", "harness"),
        ("profile", "smoke, core, full"),
        ("comparable", "all: include non-comparable"),
        ("location", "local or remote"),
        ("verified", "1: lab-verified only"),
        ("days", "7, 30, 90 or 365"),
        ("sort", "column key"),
        ("dir", "asc or desc"),
        ("page", "page number"),
    ]
]


class LeaderboardView(APIView):
    """GET /api/v1/leaderboard: one row per stack, with the same filters and sorts as the site."""

    permission_classes: list = []
    throttle_classes = READ_THROTTLES

    @extend_schema(
        parameters=FILTER_PARAMETERS,
        responses=inline_serializer(
            "LeaderboardPage",
            {
                "count": serializers.IntegerField(),
                "page": serializers.IntegerField(),
                "pages": serializers.IntegerField(),
                "next": serializers.URLField(allow_null=True),
                "previous": serializers.URLField(allow_null=True),
                "results": RunSummarySerializer(many=True),
            },
        ),
    )
    def get(self, request: Request) -> HttpResponse:
        from leaderboard import cache

        # Cached as rendered JSON until the next publish, like the HTML leaderboard (encoding
        # the body was two fifths of a cached request); the key holds the host because the
        # body carries absolute links.
        body = cache.cached(
            "api-json",
            request.build_absolute_uri(),
            lambda: JSONRenderer().render(_leaderboard_body(request)),
        )
        return HttpResponse(body, content_type="application/json")


def _leaderboard_body(request: Request) -> dict:
    from leaderboard.filters import BoardFilters
    from leaderboard.queries import board

    filters = BoardFilters.from_query(request.query_params)
    result = board(filters)
    prefetch_related_objects(result.rows, "submission__submitter")
    page = result.page
    return {
        "count": result.total,
        "page": page.number,
        "pages": page.paginator.num_pages,
        "next": _page_url(request, page.next_page_number()) if page.has_next() else None,
        "previous": (
            _page_url(request, page.previous_page_number()) if page.has_previous() else None
        ),
        # Plain dicts: a ReturnList would drag its serializer into the cache.
        "results": [dict(row) for row in RunSummarySerializer(result.rows, many=True).data],
    }


def _page_url(request: Request, number: int) -> str:
    query = request.query_params.copy()
    query["page"] = str(number)
    return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")


class StackDetailView(APIView):
    """GET /api/v1/stacks/{id}: a stack, all its approved runs and their spread."""

    permission_classes: list = []
    throttle_classes = READ_THROTTLES

    @extend_schema(
        responses=inline_serializer(
            "StackDetail",
            {
                "stack": StackSerializer(),
                "spread": serializers.DictField(),
                "runs": RunSummarySerializer(many=True),
            },
        )
    )
    def get(self, request: Request, pk: int) -> Response:
        stack = get_object_or_404(Stack, pk=pk)
        runs = list(_public_runs().filter(stack=stack).order_by("-started_at"))
        if not runs:
            raise ApiError(404, "not_found", "No approved runs for this stack.")
        return Response(
            {
                "stack": StackSerializer(stack).data,
                "spread": _spread(runs),
                "runs": RunSummarySerializer(runs, many=True).data,
            }
        )


def _spread(runs: list[Run]) -> dict:
    """Across-run distribution of the headline numbers (not within-run trial spread)."""
    out = {}
    for field in ("decode_tps_median", "prefill_tps_median", "ttft_ms_median", "overall_score"):
        values = sorted(v for v in (getattr(r, field) for r in runs) if v is not None)
        if not values:
            out[field] = None
            continue
        out[field] = {
            "n": len(values),
            "min": values[0],
            "max": values[-1],
            "median": statistics.median(values),
            "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
        }
    out["submitters"] = len({r.submission.display_submitter for r in runs})
    return out


class RunDetailView(APIView):
    """GET /api/v1/runs/{id}: one approved run with its suites and task receipts.

    DELETE (API key with submit scope, owner only): erase your run.
    """

    throttle_classes = READ_THROTTLES

    def get_permissions(self):
        if self.request.method == "DELETE":
            return [scope_required("submit")()]
        return []

    @extend_schema(responses=RunDetailSerializer)
    def get(self, request: Request, pk: int) -> Response:
        run = get_object_or_404(
            _public_runs().prefetch_related(
                Prefetch("suite_results", SuiteResult.objects.order_by("suite")),
                Prefetch("suite_results__tasks", TaskResult.objects.order_by("task_id")),
            ),
            pk=pk,
        )
        return Response(RunDetailSerializer(run).data)

    @extend_schema(
        responses={
            204: None,
            403: OpenApiResponse(description="the key lacks the submit scope"),
        }
    )
    def delete(self, request: Request, pk: int) -> Response:
        run = (
            Run.objects.select_related("submission")
            .filter(pk=pk, submission__submitter=request.user)
            .first()
        )
        if run is None:  # someone else's run looks exactly like a missing one
            raise ApiError(404, "not_found", "Not found.")
        delete_run(submission=run.submission)
        return Response(status=204)


class HardwareListView(APIView):
    """GET /api/v1/hardware: every machine class with approved runs, most runs first."""

    permission_classes: list = []
    throttle_classes = READ_THROTTLES

    @extend_schema(
        parameters=[OpenApiParameter("page", int, description="page number")],
        responses={
            200: inline_serializer(
                "HardwarePage",
                {
                    "count": serializers.IntegerField(),
                    "next": serializers.URLField(allow_null=True),
                    "previous": serializers.URLField(allow_null=True),
                    "results": HardwareRowSerializer(many=True),
                },
            ),
            404: OpenApiResponse(description="no such page"),
        },
    )
    def get(self, request: Request) -> Response:
        hardware = (
            Hardware.objects.annotate(run_count=Count("runs", filter=Q(runs__published=True)))
            .filter(run_count__gt=0)
            .order_by("-run_count", "gpu_model", "id")
        )
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(hardware, request, view=self)
        data = [{**HardwareSerializer(h).data, "run_count": h.run_count} for h in page]
        return paginator.get_paginated_response(data)
