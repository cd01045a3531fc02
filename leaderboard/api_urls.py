from __future__ import annotations

from django.urls import path

from leaderboard import api
from leaderboard.matrix_api import MatrixView

urlpatterns = [
    path("leaderboard", api.LeaderboardView.as_view(), name="api-leaderboard"),
    path("stacks/<int:pk>", api.StackDetailView.as_view(), name="api-stack"),
    path("runs/<int:pk>", api.RunDetailView.as_view(), name="api-run"),
    path("hardware", api.HardwareListView.as_view(), name="api-hardware"),
    path("matrix", MatrixView.as_view(), name="api-matrix"),
    path("hardware-classes", api.HardwareClassListView.as_view(), name="api-hardware-classes"),
]
