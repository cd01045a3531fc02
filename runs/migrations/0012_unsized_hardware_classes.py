"""A hardware class without its memory size is no peer of the sized ones (issue 32): an
imported "Apple M1 Pro" beside "Apple M1 Pro 32 GB" joins it where it is the one sized class
of that chip and count (its machines and runs move, the lanes of their stacks are rebuilt),
and is otherwise relabelled "… · memory not reported"."""

from __future__ import annotations

from types import SimpleNamespace

from django.db import migrations


def merge(apps, schema_editor) -> None:
    from runs.identities import merge_unsized_classes
    from runs.lanes import LaneModels, refresh_lanes

    run = apps.get_model("runs", "Run")
    lane = apps.get_model("runs", "Lane")
    hardware_class = apps.get_model("runs", "HardwareClass")
    lane_models = LaneModels(run=run, lane=lane, hardware_class=hardware_class)
    merge_unsized_classes(
        SimpleNamespace(
            hardware_class=hardware_class,
            hardware=apps.get_model("runs", "Hardware"),
            run=run,
            lane=lane,
        ),
        lambda stack_ids: refresh_lanes(stack_ids, models=lane_models),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0011_lane_overall_median"),
    ]

    operations = [
        migrations.RunPython(merge, migrations.RunPython.noop, elidable=True),
    ]
