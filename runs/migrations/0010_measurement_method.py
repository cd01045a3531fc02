from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    """Each run and stack records how its speeds were measured (runs.methods); a run records
    where a measurement we did not make came from. Every stored run is our own engine's."""

    dependencies = [
        ("runs", "0009_harness_format_names"),
    ]

    operations = [
        migrations.AddField(
            model_name="stack",
            name="method",
            field=models.CharField(db_index=True, default="benchloop-stream", max_length=30),
        ),
        migrations.AddField(
            model_name="run",
            name="method",
            field=models.CharField(default="benchloop-stream", max_length=30),
        ),
        migrations.AddField(
            model_name="run",
            name="provenance",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AlterField(
            model_name="run",
            name="source_format",
            field=models.CharField(
                choices=[
                    ("bundle-1", "BenchLoop bundle v1"),
                    ("run-v3", "run.json v3 (cli 0.3.0)"),
                    ("envelope-v3", "v3 publish envelope"),
                    ("failed-v3", "failed-run record"),
                    ("run-v2", "run.json v2 (cli 0.2.3)"),
                    ("leaderboard-v2", "leaderboard.json export"),
                    ("leaderboard-v1", "leaderboard-v1.json speed stack"),
                    ("speed-jsonl", "speed-probe JSONL"),
                    ("demo", "synthetic demo"),
                    ("llama-bench", "llama-bench output"),
                    ("llama-benchy", "llama-benchy output"),
                    ("localmaxxing", "LocalMaxxing leaderboard row"),
                    ("llmfit", "llmfit community submission"),
                    ("club-5060ti", "club-5060ti result"),
                ],
                max_length=20,
            ),
        ),
    ]
