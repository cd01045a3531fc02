"""Lanes rank by their median (issue 29): each lane stores its overall score's median and
interval, and its medians exist from one run (the interval from three). Every lane is
recomputed from its runs."""

from __future__ import annotations

from django.db import migrations, models
from django.db.models import Q


def recompute(apps, schema_editor) -> None:
    from runs.lanes import LaneModels, refresh_lanes

    stack = apps.get_model("runs", "Stack")
    refresh_lanes(
        stack.objects.values_list("id", flat=True),
        models=LaneModels(
            run=apps.get_model("runs", "Run"),
            lane=apps.get_model("runs", "Lane"),
            hardware_class=apps.get_model("runs", "HardwareClass"),
        ),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0010_measurement_method"),
    ]

    operations = [
        migrations.AddField(
            model_name="lane",
            name="overall_median",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="lane",
            name="overall_low",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="lane",
            name="overall_high",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.RemoveConstraint(
            model_name="lane",
            name="lane_pooled_has_no_speed",
        ),
        migrations.AddConstraint(
            model_name="lane",
            constraint=models.CheckConstraint(
                condition=Q(hardware_class__isnull=False)
                | Q(
                    overall_median__isnull=True,
                    decode_median__isnull=True,
                    prefill_median__isnull=True,
                    ttft_median__isnull=True,
                ),
                name="lane_pooled_has_no_speed",
            ),
        ),
        migrations.RunPython(recompute, migrations.RunPython.noop),
    ]
