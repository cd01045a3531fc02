"""Stored public fields lose addresses, secrets and home-directory names, as new uploads do.

Uploads are now scrubbed when they are parsed (runs.importers.public_fields); rows stored
before that may carry what the review found: an IP, a host:port or /home/<user> in a model id,
a draft model's path, an engine version, a hardware name or a task id. Only rows that change
are written; redact_field never makes a value longer, so every value still fits its column.
Identity keys (comparability_key, canonical_key) stay as they are.
"""

from __future__ import annotations

from django.db import migrations

FIELDS = {
    "Stack": ("model_id", "quantization", "engine", "harness", "kv_cache_type", "draft_model"),
    "Run": (
        "engine_version",
        "provider",
        "harness_version",
        "benchmark_id",
        "benchmark_version",
        "profile",
        "requested_profile",
        "manifest_hash",
    ),
    "Hardware": ("cpu_model", "gpu_model", "os"),
    "TaskResult": ("task_id", "finish_reason"),
}


def redact_stored(apps, schema_editor):
    from worker.rules.redact import redact_field

    for model_name, fields in FIELDS.items():
        model = apps.get_model("runs", model_name)
        changed = []
        for row in model.objects.only("pk", *fields).iterator(chunk_size=2000):
            dirty = False
            for name in fields:
                value = getattr(row, name)
                clean = redact_field(value)
                if clean != value:
                    setattr(row, name, clean)
                    dirty = True
            if dirty:
                changed.append(row)
            if len(changed) >= 500:
                model.objects.bulk_update(changed, fields)
                changed = []
        if changed:
            model.objects.bulk_update(changed, fields)


class Migration(migrations.Migration):
    dependencies = [("runs", "0003_run_raw_payload_objects")]

    operations = [migrations.RunPython(redact_stored, migrations.RunPython.noop)]
