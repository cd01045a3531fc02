"""What the leaderboard keeps worked out from the lanes (runs.Lane), written with them."""

from __future__ import annotations

from django.db import models

from runs.models import HardwareClass


class ClassBoard(models.Model):
    """One hardware class's board of one score scale and version: the runs published on it and
    its stacks in the board's default order, one list per measurement method (each method is
    ranked apart). Written in the transaction that changes its lanes (leaderboard.places), so a
    stack's place and a class's run count cost a read of one row, however many runs there are.
    """

    hardware_class = models.ForeignKey(
        HardwareClass, on_delete=models.CASCADE, related_name="boards"
    )
    score_scale = models.CharField(max_length=8)
    benchmark_version = models.CharField(max_length=20, blank=True)
    # The published runs its lanes count (runs.Lane.run_count summed).
    run_count = models.PositiveIntegerField(default=0)
    # {method: lanes ranked}, which the board's menus count.
    ranked = models.JSONField(default=dict)
    # {method: {"s<stack id>": place}} in the board's default order (leaderboard.queries.
    # lane_order), read a key at a time (place_key); None until first worked out (the
    # migration that made this table filled the counts alone).
    places = models.JSONField(null=True, blank=True)
    # When it was last written (leaderboard.scopes.boards_fingerprint).
    written_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hardware_class", "score_scale", "benchmark_version"],
                name="class_board_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.hardware_class_id} {self.score_scale} {self.benchmark_version}"

    @staticmethod
    def place_key(stack_id: int) -> str:
        """A stack's key in `places`: not a bare number, which SQLite's JSON paths would read
        as an array index."""
        return f"s{stack_id}"
