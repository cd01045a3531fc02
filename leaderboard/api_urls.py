from __future__ import annotations

from django.urls import path

from leaderboard import api
from leaderboard.estimates_api import EstimatesView
from leaderboard.matrix_api import MatrixView
from leaderboard.standing_api import RunStandingView

urlpatterns = [
    path("leaderboard", api.LeaderboardView.as_view(), name="api-leaderboard"),
    path("stacks/<int:pk>", api.StackDetailView.as_view(), name="api-stack"),
    path("runs/<int:pk>", api.RunDetailView.as_view(), name="api-run"),
    path("runs/<int:pk>/standing", RunStandingView.as_view(), name="api-run-standing"),
    path("hardware", api.HardwareListView.as_view(), name="api-hardware"),
    path("matrix", MatrixView.as_view(), name="api-matrix"),
    path("estimates", EstimatesView.as_view(), name="api-estimates"),
    path("hardware-classes", api.HardwareClassListView.as_view(), name="api-hardware-classes"),
]
