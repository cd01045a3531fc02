from __future__ import annotations

from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "leaderboard"

    def ready(self) -> None:
        from leaderboard import places
        from runs.signals import lanes_changed

        lanes_changed.connect(places.boards_changed, dispatch_uid="leaderboard-class-boards")
