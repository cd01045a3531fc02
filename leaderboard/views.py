"""Public pages: the leaderboard and the health check."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db import connection
from django.db.models import F
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers
from django_htmx.middleware import HtmxDetails

from runs.models import ScoreScale, Stack


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


SCALES = {
    ScoreScale.V3: "Ranked (v3 scores)",
    ScoreScale.V2: "Legacy v2 scores",
    ScoreScale.SPEED_ONLY: "Speed-only stacks",
}
SORTS = {
    "overall": "best_run__overall_score",
    "quality": "best_run__quality_score",
    "speed": "best_run__speed_score",
    "reliability": "best_run__reliability_score",
    "decode": "best_run__decode_tps_median",
    "ttft": "best_run__ttft_ms_median",
    "runs": "published_run_count",
}
ASCENDING_SORTS = {"ttft"}  # lower is better
PAGE_SIZE = 50


@require_GET
@vary_on_headers("HX-Request")
def leaderboard(request: HtmxHttpRequest) -> HttpResponse:
    scale = request.GET.get("scale", ScoreScale.V3)
    if scale not in SCALES:
        scale = ScoreScale.V3
    default_sort = "decode" if scale == ScoreScale.SPEED_ONLY else "overall"
    sort = request.GET.get("sort", default_sort)
    if sort not in SORTS:
        sort = default_sort
    column = F(SORTS[sort])
    ordering = (
        column.asc(nulls_last=True) if sort in ASCENDING_SORTS else column.desc(nulls_last=True)
    )
    stacks = (
        Stack.objects.filter(best_run__isnull=False, best_run__score_scale=scale)
        .select_related("best_run", "best_run__hardware")
        .order_by(ordering, "id")
    )
    page = Paginator(stacks, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "rank_offset": page.start_index() - 1 if page.paginator.count else 0,
        "scale": scale,
        "scales": SCALES,
        "sort": sort,
        "sorts": list(SORTS),
    }
    template = "leaderboard/leaderboard.html"
    if request.htmx:
        template += "#results"
    return render(request, template, context)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Database and broker reachability, for load balancers and the README's smoke check."""
    from benchloop_site.celery import app

    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # any failure means "not healthy"; say which kind
        checks["database"] = f"error: {type(exc).__name__}"
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=3)
        checks["broker"] = "ok"
    except Exception as exc:
        checks["broker"] = f"error: {type(exc).__name__}"
    healthy = all(value == "ok" for value in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "error", **checks}, status=200 if healthy else 503
    )
