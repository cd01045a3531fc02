"""The prompt formats hermes, qwen and pi are xml-tool-call, xml-function-call and
think-xml-tool-call (issue 19): the real Hermes Agent is a harness program now, and a stack
named "hermes" would be mistaken for it.

Stacks are renamed and re-keyed (the harness is part of the comparability key), and a renamed
stack whose key now equals a stack already stored under the new name is merged into it, its
runs moved and its lanes rebuilt. Backwards the names and keys are the old ones again; stacks
merged on the way forward stay merged (their runs measured the same thing).
"""

from __future__ import annotations

from django.db import migrations
from django.db.models import Q

# Frozen here: the engine's table may grow, this migration must not change with it.
RENAMES = {"hermes": "xml-tool-call", "qwen": "xml-function-call", "pi": "think-xml-tool-call"}


def _rename(apps, names: dict[str, str]) -> None:
    from runs.identities import Models, rederive_stacks
    from runs.lanes import LaneModels, refresh_lanes

    models = Models.from_apps(apps)
    touched = list(
        models.stack.objects.filter(harness__in=list(names)).values_list("id", flat=True)
    )
    if not touched:
        return
    for old, new in names.items():
        models.stack.objects.filter(harness=old).update(harness=new)
    # The renamed stacks and any they may now coincide with (same new name).
    rederive_stacks(models, only=Q(harness__in=list(names.values())))
    survivors = models.stack.objects.filter(harness__in=list(names.values()))
    refresh_lanes(
        survivors.values_list("id", flat=True),
        models=LaneModels(run=models.run, lane=models.lane, hardware_class=models.hardware_class),
    )


def forwards(apps, schema_editor) -> None:
    _rename(apps, RENAMES)


def backwards(apps, schema_editor) -> None:
    _rename(apps, {new: old for old, new in RENAMES.items()})


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0008_run_comparability_contention"),
        ("submissions", "0008_accelerator_override"),
        ("worker", "0006_job_choices_on_the_model"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
