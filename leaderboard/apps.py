from __future__ import annotations

from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "leaderboard"
