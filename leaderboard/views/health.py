"""The health check for load balancers and the README's smoke test."""

from __future__ import annotations

from celery import current_app
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from core.unavailable import RETRY_AFTER_SECONDS


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """Database and broker reachability, for load balancers and the README's smoke check."""
    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # any failure means "not healthy"; say which kind
        checks["database"] = f"error: {type(exc).__name__}"
    try:
        # The project's app (benchloop_site.celery makes itself current): the wiring above
        # the apps is not imported from here.
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=3)
        checks["broker"] = "ok"
    except Exception as exc:
        checks["broker"] = f"error: {type(exc).__name__}"
    if all(value == "ok" for value in checks.values()):
        return JsonResponse({"status": "ok", **checks})
    response = JsonResponse({"status": "error", **checks}, status=503)
    # Load balancers and monitors back off and ask again, as for any other 503 of the site.
    response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


@require_safe
def bench_baseline(request: HttpRequest) -> HttpResponse:
    """A constant answer for the load benchmark's baseline (routed only when it is on)."""
    return HttpResponse("ok", content_type="text/plain")
