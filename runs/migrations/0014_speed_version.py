"""Speed is versioned apart from the benchmark (issue 29): each run records the version of
the way its speed was measured, and the speed-only scale's lanes are keyed by it, so a new
benchmark version (new quality tasks) leaves the speed boards whole while the speed method
stays the same. Stored runs get their format's version (runs.methods, frozen here)."""

from __future__ import annotations

from django.db import migrations, models

# Frozen here: runs.methods may grow, this migration must not change with it.
OURS = "benchloop-stream"
FORMATS = {
    "run-v3": "cli-0.3",
    "envelope-v3": "cli-0.3",
    "failed-v3": "cli-0.3",
    "run-v2": "cli-0.2",
    "leaderboard-v2": "cli-0.2",
    "leaderboard-v1": "probe",
    "speed-jsonl": "probe",
}


def _refresh_speed_lanes(apps) -> None:
    from runs.lanes import LaneModels, refresh_lanes

    run = apps.get_model("runs", "Run")
    stacks = run.objects.filter(score_scale="speed").values_list("stack_id", flat=True)
    refresh_lanes(
        stacks.distinct(),
        models=LaneModels(
            run=run,
            lane=apps.get_model("runs", "Lane"),
            hardware_class=apps.get_model("runs", "HardwareClass"),
        ),
    )


def forwards(apps, schema_editor) -> None:
    run = apps.get_model("runs", "Run")
    ours = run.objects.filter(method=OURS)
    ours.exclude(source_format__in=list(FORMATS)).update(speed_version="1")
    for source_format, version in FORMATS.items():
        ours.filter(source_format=source_format).update(speed_version=version)
    _refresh_speed_lanes(apps)


def rekey_by_benchmark(apps, schema_editor) -> None:
    """Backwards, once the field is gone: the speed-only lanes keyed by benchmark version."""
    _refresh_speed_lanes(apps)


class Migration(migrations.Migration):
    dependencies = [("runs", "0013_param_tiers")]

    operations = [
        # Reversed last, after the field is removed (runs.lanes then keys by benchmark version).
        migrations.RunPython(migrations.RunPython.noop, rekey_by_benchmark),
        migrations.AddField(
            model_name="run",
            name="speed_version",
            field=models.CharField(blank=True, default="", max_length=20),
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
