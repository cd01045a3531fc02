from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from leaderboard.views import bench_baseline, healthz
from submissions.api import LegacySubmitView

api_v1: list[URLPattern | URLResolver] = [
    path("", include("submissions.api_urls")),
    path("", include("leaderboard.api_urls")),
    path("", include("lab.api_urls")),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("submit", LegacySubmitView.as_view(), name="legacy-submit"),
    path("account/", include("submissions.urls")),
    path("lab/", include("lab.urls")),
    path("", include("submissions.moderation_urls")),
    path("", include("leaderboard.urls")),
]

if settings.BENCHLOOP_BENCH_BASELINE:
    urlpatterns.insert(0, path("bench/baseline", bench_baseline))

# Errors under /api/ answer in the API's JSON error shape; pages get the site's error pages.
handler400 = "core.errors.bad_request"
handler403 = "core.errors.permission_denied"
handler404 = "core.errors.not_found"
handler500 = "core.unavailable.server_error"
