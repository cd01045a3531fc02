"""Moderators' additions to the accelerator data file (submissions.AcceleratorOverride)."""

from __future__ import annotations

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("submissions", "0007_anonymous_is_nobody"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="AcceleratorOverride",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=100)),
                ("name_key", models.CharField(max_length=100, unique=True)),
                (
                    "kind",
                    models.CharField(
                        choices=[("gpu", "GPU"), ("apple", "Apple chip"), ("cpu", "CPU")],
                        max_length=8,
                    ),
                ),
                ("memory_gb", models.FloatField(blank=True, null=True)),
                ("bandwidth_gbps", models.FloatField()),
                ("fp16_tflops", models.FloatField(blank=True, null=True)),
                ("int8_tops", models.FloatField(blank=True, null=True)),
                ("source", models.CharField(max_length=300)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "added_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("bandwidth_gbps__gt", 0)),
                        name="acceleratoroverride_bandwidth_positive",
                    )
                ],
            },
        ),
    ]
