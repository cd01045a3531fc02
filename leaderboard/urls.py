from __future__ import annotations

from django.urls import path

from leaderboard import views

app_name = "leaderboard"

urlpatterns = [
    path("", views.leaderboard, name="home"),
    path("leaderboard/", views.leaderboard, name="leaderboard"),
]
