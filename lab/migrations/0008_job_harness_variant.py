# A job can run an agent program's variant (Aider's edit format) and the matrix profile (issue 19).

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("worker", "0007_harness_format_names")]

    operations = [
        migrations.AddField(
            model_name="benchmarkjob",
            name="harness_variant",
            field=models.CharField(
                blank=True,
                help_text="an agent program's variant, e.g. Aider's edit format",
                max_length=40,
            ),
        ),
        migrations.AlterField(
            model_name="benchmarkjob",
            name="profile",
            field=models.CharField(
                blank=True,
                choices=[
                    ("smoke", "smoke"),
                    ("core", "core"),
                    ("full", "full"),
                    ("matrix", "matrix"),
                ],
                default="smoke",
                max_length=20,
            ),
        ),
    ]
