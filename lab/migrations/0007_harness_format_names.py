# Jobs that asked for the prompt formats hermes, qwen or pi ask for them by their new names
# (issue 19); backwards, the old names again.

from __future__ import annotations

from django.db import migrations

RENAMES = {"hermes": "xml-tool-call", "qwen": "xml-function-call", "pi": "think-xml-tool-call"}


def _rename(apps, names: dict[str, str]) -> None:
    job = apps.get_model("worker", "BenchmarkJob")
    for old, new in names.items():
        job.objects.filter(harness=old).update(harness=new)


def forwards(apps, schema_editor) -> None:
    _rename(apps, RENAMES)


def backwards(apps, schema_editor) -> None:
    _rename(apps, {new: old for old, new in RENAMES.items()})


class Migration(migrations.Migration):
    dependencies = [("worker", "0006_job_choices_on_the_model")]

    operations = [migrations.RunPython(forwards, backwards)]
