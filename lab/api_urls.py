from __future__ import annotations

from django.urls import path

from lab import api

urlpatterns = [
    path("jobs", api.JobQueueView.as_view(), name="api-jobs"),
    path("jobs/<int:pk>", api.JobDetailView.as_view(), name="api-job"),
]
