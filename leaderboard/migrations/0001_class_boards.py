"""The class boards (leaderboard.models.ClassBoard), their run and lane counts filled from the
lanes.

Their places are worked out the first time a page asks for it (leaderboard.places.lane_places):
that rule is the board's own (leaderboard.queries.lane_order), which a migration cannot run."""

from collections import defaultdict

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import Count, Sum
from django.utils import timezone


def fill(apps, schema_editor):
    lane = apps.get_model("runs", "Lane")
    board = apps.get_model("leaderboard", "ClassBoard")
    lanes = lane.objects.filter(hardware_class__isnull=False, run_count__gt=0)
    key = ("hardware_class_id", "score_scale", "benchmark_version")
    runs = lanes.values_list(*key).annotate(n=Sum("run_count")).order_by()
    ranked, now = defaultdict(dict), timezone.now()
    counted = lanes.filter(best_run__isnull=False).values_list(*key, "stack__method")
    for c, s, v, method, n in counted.annotate(n=Count("id")).order_by():
        ranked[(c, s, v)][method] = n
    board.objects.bulk_create(
        [
            board(
                hardware_class_id=c,
                score_scale=s,
                benchmark_version=v,
                run_count=n,
                ranked=ranked[(c, s, v)],
                written_at=now,
            )
            for c, s, v, n in runs
        ],
        batch_size=500,
    )


class Migration(migrations.Migration):
    initial = True

    dependencies = [("runs", "0019_lane_class_mark_idx")]

    operations = [
        migrations.CreateModel(
            name="ClassBoard",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("score_scale", models.CharField(max_length=8)),
                ("benchmark_version", models.CharField(blank=True, max_length=20)),
                ("run_count", models.PositiveIntegerField(default=0)),
                ("ranked", models.JSONField(default=dict)),
                ("places", models.JSONField(blank=True, null=True)),
                ("written_at", models.DateTimeField(blank=True, null=True)),
                (
                    "hardware_class",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="boards",
                        to="runs.hardwareclass",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("hardware_class", "score_scale", "benchmark_version"),
                        name="class_board_unique",
                    )
                ]
            },
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
