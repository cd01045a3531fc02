from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from leaderboard.views import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("", include("leaderboard.urls")),
]
