"""The public read API (DRF): leaderboard lanes, stacks, runs and hardware. Published runs only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Count, Prefetch, Q
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ApiError
from core.throttling import AnonThrottle, UserThrottle
from leaderboard import summaries
from leaderboard.api_serializers import (
    HardwareClassSerializer,
    HardwareRowSerializer,
    HardwareSerializer,
    LaneRowSerializer,
    RunDetailSerializer,
    RunSummarySerializer,
    StackSerializer,
)
from leaderboard.exports import view_meta
from leaderboard.filters import BoardFilters
from leaderboard.queries import board
from leaderboard.rows import Figure, Row
from runs.figures import Interval
from runs.models import Hardware, Run, RunQuerySet, Stack, SuiteResult, TaskResult
from submissions.permissions import scope_required
from submissions.services import delete_run

READ_THROTTLES = [AnonThrottle, UserThrottle]


def _public_runs() -> RunQuerySet:
    return Run.objects.published().select_related("stack", "hardware", "submission__submitter")


FILTER_PARAMETERS = [
    OpenApiParameter(name, str, description=text)
    for name, text in [
        ("hw", "hardware class slug (see /api/v1/hardware-classes), or all: quality only"),
        ("vram", "GPU memory size: 8, 12, 16, 24, 32, 48 or 80+"),
        ("fits", "the most memory (GB) the stack may need: lanes on hardware with at most that"),
        (
            "scale",
            "v3 (default: v3 where the hardware has v3 rows, else speed, else v2), v2 or speed",
        ),
        (
            "method",
            "how speeds were measured: benchloop-stream, llama-bench, llama-benchy, localmaxxing, "
            "llmfit or club-5060ti (default: the method with the most rows in view; a view "
            "never ranks two methods together)",
        ),
        ("imported", "hide: leave out runs imported from community sources"),
        (
            "bv",
            "the version ranked: the benchmark version, or on scale=speed the speed method's "
            "(default: the one with the most rows in view)",
        ),
        ("q", "free text"),
        ("vendor", "nvidia, amd, apple, intel"),
        ("gpu", "GPU model"),
        ("cpu", "1: CPU-only machines"),
        ("apple", "1: Apple Silicon"),
        ("engine", "engine"),
        ("backend", "compute backend: cuda, rocm, metal, vulkan, sycl or cpu"),
        ("quant", "quantization"),
        ("family", "model family"),
        ("params", "model-size tier: to-4b, 7-9b, 12-15b, 24-35b, 40-65b or 70b-up"),
        ("harness", "harness"),
        ("profile", "smoke, core, full"),
        ("comparable", "all: include non-comparable"),
        ("location", "local or remote"),
        ("verified", "1: lab-verified only"),
        ("days", "7, 30, 90 or 365"),
        (
            "cols",
            "per-suite columns, comma-separated: toolcall, coding, agent, longcontext, "
            "instructfollow, dataextract, reasonmath, loop_code_fix, loop_schema (each row "
            "gains suites: {name: figure or null})",
        ),
        ("sort", "column key, or suite:NAME to sort by a per-suite column"),
        ("dir", "asc or desc"),
        ("page", "page number"),
    ]
]


def _figure(figure: Figure | None) -> dict[str, Any] | None:
    if figure is None:
        return None
    interval = [figure.low, figure.high] if figure.has_interval else None
    return {"value": figure.value, "n": figure.n, "ci95": interval}


@dataclass(frozen=True)
class _RowSerializers:
    """One serializer of each kind for all the rows of a page: a ModelSerializer builds its
    fields on first use, and one per row made that most of a cold API page (at 1,000,000
    runs: 2 ms a row of a 50-row page)."""

    stack: StackSerializer = field(default_factory=StackSerializer)
    hardware_class: HardwareClassSerializer = field(default_factory=HardwareClassSerializer)


def _lane_row(row: Row, *, pooled: bool, shared: _RowSerializers) -> dict[str, Any]:
    """One row as JSON. On the all-hardware view it carries no speed and no score that
    includes speed, not even its best run's."""
    run = row.best_run
    best: dict[str, Any] | None = None
    if run is not None:
        best = {"id": run.id, "url": f"/runs/{run.id}/", "quality_score": run.quality_score}
        best.update(is_verified=run.is_verified, started_at=run.started_at.isoformat())
        if not pooled:
            best.update(
                overall_score=run.overall_score,
                decode_tps_median=run.decode_tps,
                prefill_tps_median=run.prefill_tps,
                ttft_ms_median=run.ttft_ms,
                engine_version=run.engine_version,
            )
    out: dict[str, Any] = {
        "stack": dict(shared.stack.to_representation(row.stack)) if row.stack else None,
        "hardware_class": (
            dict(shared.hardware_class.to_representation(row.hardware_class))
            if row.hardware_class
            else None
        ),
        "runs": row.runs,
        "submitters": row.submitters,
        "attempts": row.best_of,
        "few_runs": row.few_runs,
        "quality": _figure(row.quality),
        "best_run": best,
    }
    if row.suites:
        # The per-suite columns asked for (?cols=, or ?sort=suite:…): quality suites only.
        out["suites"] = {name: _figure(figure) for name, figure in row.suites.items()}
    if not pooled:
        out.update(
            overall=_figure(row.overall),
            overall_best_run=row.best_overall,
            decode_tps=_figure(row.decode),
            prefill_tps=_figure(row.prefill),
            ttft_ms=_figure(row.ttft),
        )
    return out


class LeaderboardView(APIView):
    """GET /api/v1/leaderboard: one row per lane (a stack on one hardware class), with the
    same hardware choice, filters and sorts as the site. Without hw, vram or fits it ranks on
    the hardware class with the most runs, and says which in `view`."""

    permission_classes = [AllowAny]
    throttle_classes = READ_THROTTLES

    @extend_schema(
        parameters=FILTER_PARAMETERS,
        responses=inline_serializer(
            "LeaderboardPage",
            {
                "view": serializers.DictField(
                    help_text="the hardware, scale and benchmark version the rows are about; "
                    "mixes_hardware and warning on the all-hardware view"
                ),
                "count": serializers.IntegerField(),
                "page": serializers.IntegerField(),
                "pages": serializers.IntegerField(),
                "next": serializers.URLField(allow_null=True),
                "previous": serializers.URLField(allow_null=True),
                "results": LaneRowSerializer(many=True),
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


def _leaderboard_body(request: Request) -> dict[str, Any]:
    result = board(BoardFilters.from_query(request.query_params), scatter_limit=0)
    filters = result.filters
    page = result.page
    pooled = result.scope.pooled
    view = view_meta(filters, result.scope, result.version)
    if result.too_many_runs:
        view["too_many_runs"] = True  # a run filter matched too many runs: narrow the view
    shared = _RowSerializers()
    return {
        "view": view,
        "count": result.total,
        "page": page.number,
        "pages": page.paginator.num_pages,
        "next": _page_url(request, page.next_page_number()) if page.has_next() else None,
        "previous": (
            _page_url(request, page.previous_page_number()) if page.has_previous() else None
        ),
        "results": [
            {"rank": row.rank or place, **_lane_row(row, pooled=pooled, shared=shared)}
            for place, row in enumerate(result.rows, start=page.start_index() or 1)
        ],
    }


def _page_url(request: Request, number: int) -> str:
    query = request.query_params.copy()
    query["page"] = str(number)
    return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")


class HardwareClassListView(APIView):
    """GET /api/v1/hardware-classes: every hardware class with published runs (the values of
    the leaderboard's hw parameter), most runs first within each kind."""

    permission_classes = [AllowAny]
    throttle_classes = READ_THROTTLES

    @extend_schema(
        responses=inline_serializer(
            "HardwareClassList",
            {
                "results": inline_serializer(
                    "HardwareClassRow",
                    {
                        "slug": serializers.CharField(),
                        "label": serializers.CharField(),
                        "kind": serializers.CharField(),
                        "memory_gb": serializers.FloatField(allow_null=True),
                        "runs": serializers.IntegerField(),
                    },
                    many=True,
                )
            },
        )
    )
    def get(self, request: Request) -> Response:
        from leaderboard.menus import cached_hardware_choices

        choices = cached_hardware_choices()
        keep = ("slug", "label", "kind", "memory_gb", "runs")
        return Response({"results": [{k: c[k] for k in keep} for c in choices]})


class StackDetailView(APIView):
    """GET /api/v1/stacks/{id}: a stack, all its approved runs, its lanes (speed per hardware
    class, never pooled across classes) and its quality pooled across all hardware."""

    permission_classes = [AllowAny]
    throttle_classes = READ_THROTTLES

    @extend_schema(
        responses=inline_serializer(
            "StackDetail",
            {
                "stack": StackSerializer(),
                "lanes": serializers.ListField(child=serializers.DictField()),
                "quality": serializers.ListField(child=serializers.DictField()),
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
                **_lanes(stack),
                "runs": RunSummarySerializer(runs, many=True).data,
            }
        )


def _interval(value: Interval) -> dict[str, Any]:
    return {"n": value.n, "median": value.median, "low": value.low, "high": value.high}


def _lanes(stack: Stack) -> dict[str, Any]:
    """The stack page's lanes: medians (from one run) with 95% intervals (null below three
    runs), runs.figures.Interval."""

    rows = summaries.run_rows(Run.objects.published().filter(stack=stack))
    proof = summaries.evidence(rows, summaries.attempts_of([stack.id]))
    lanes: list[dict[str, Any]] = []
    quality: list[dict[str, Any]] = []
    for scope in proof.scopes:
        scale, version = scope.key
        quality.append(
            {"score_scale": scale, "benchmark_version": version, **_interval(scope.quality)}
        )
        for lane in scope.lanes:
            figures = lane.figures
            lanes.append(
                {
                    "hardware_class": {"slug": lane.slug, "label": lane.hardware},
                    "score_scale": scale,
                    "benchmark_version": version,
                    "runs": lane.run_count,
                    "submitters": figures.submitters,
                    "attempts": lane.attempts,
                    "best_run": lane.best["id"] if lane.best else None,
                    "decode_tps": _interval(figures.decode),
                    "prefill_tps": _interval(figures.prefill),
                    "ttft_ms": _interval(figures.ttft),
                    "overall_score": _interval(figures.overall),
                }
            )
    return {"lanes": lanes, "quality": quality}


class RunDetailView(APIView):
    """GET /api/v1/runs/{id}: one approved run with its suites and task receipts.

    DELETE (API key with submit scope, owner only): erase your run.
    """

    throttle_classes = READ_THROTTLES

    def get_permissions(self) -> list[BasePermission]:
        if self.request.method == "DELETE":
            return [scope_required("submit")()]
        return [AllowAny()]

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
        user = request.user
        assert isinstance(user, User)  # the submit scope lets only an API key's owner here
        run = (
            Run.objects.select_related("submission")
            .filter(pk=pk, submission__submitter=user)
            .first()
        )
        if run is None:  # someone else's run looks exactly like a missing one
            raise ApiError(404, "not_found", "Not found.")
        delete_run(submission=run.submission)
        return Response(status=204)


class HardwareListView(APIView):
    """GET /api/v1/hardware: every machine class with approved runs, most runs first."""

    permission_classes = [AllowAny]
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
        assert page is not None  # None only without a page size: settings set PAGE_SIZE
        data = [{**HardwareSerializer(h).data, "run_count": h.run_count} for h in page]
        return paginator.get_paginated_response(data)
