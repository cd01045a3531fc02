from __future__ import annotations

from django.urls import path

from leaderboard import api

urlpatterns = [
    path("leaderboard", api.LeaderboardView.as_view(), name="api-leaderboard"),
    path("stacks/<int:pk>", api.StackDetailView.as_view(), name="api-stack"),
    path("runs/<int:pk>", api.RunDetailView.as_view(), name="api-run"),
    path("hardware", api.HardwareListView.as_view(), name="api-hardware"),
    path("hardware-classes", api.HardwareClassListView.as_view(), name="api-hardware-classes"),
]
