"""Model-size tiers named as people shop (issue 29): every stack's param_bucket is worked out
again from its parameter count with runs.normalize's tiers."""

from __future__ import annotations

from django.db import migrations

# Frozen here: the tiers may change, this migration must not change with them.
TIERS = [(5.0, "to-4b"), (10.5, "7-9b"), (20.0, "12-15b"), (40.0, "24-35b"), (65.0, "40-65b")]
TOP = "70b-up"
OLD = [(3, "<=3B"), (9, "3-9B"), (20, "9-20B"), (40, "20-40B"), (80, "40-80B")]
OLD_TOP = "80B+"


def _bucket(value, bounds, top) -> str:
    if value is None or value <= 0:
        return ""
    for upper, label in bounds:
        if value <= upper + 1e-9:
            return label
    return top


def _rebucket(apps, bounds, top) -> None:
    stack = apps.get_model("runs", "Stack")
    changed = []
    for found in stack.objects.only("id", "params_b", "param_bucket").iterator(chunk_size=2000):
        wanted = _bucket(found.params_b, bounds, top)
        if found.param_bucket != wanted:
            found.param_bucket = wanted
            changed.append(found)
    stack.objects.bulk_update(changed, ["param_bucket"], batch_size=1000)


def forwards(apps, schema_editor) -> None:
    _rebucket(apps, TIERS, TOP)


def backwards(apps, schema_editor) -> None:
    _rebucket(apps, OLD, OLD_TOP)


class Migration(migrations.Migration):
    dependencies = [("runs", "0012_unsized_hardware_classes")]

    operations = [migrations.RunPython(forwards, backwards)]
