"""Re-derive every stored machine, stack and run for hardware classes, and build the lanes.

Machines: a CPU's name that an old importer stored as a GPU (a machine label such as "AMD EPYC
512GB RAM" became a GPU named "EPYC RAM") is a CPU-only machine again; GPUs listed one by one
("RTX 3090, RTX 3090") are counted; machines whose canonical keys now coincide are merged and
their runs repointed. Each machine gets its hardware class, each run its machine's class (or
the remote endpoint's, or unknown hardware). Stacks are re-keyed from their stored fields
(weights digests normalised, unset launch settings dropped) and merged where keys coincide.
Then every stack's lanes are built. Backwards it changes nothing: the classes and lanes go
with the schema of 0005 and 0006.
"""

from __future__ import annotations

from django.db import migrations


def rederive(apps, schema_editor) -> None:
    from runs.identities import rederive_all

    rederive_all(apps)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0006_hardware_class_refinements"),
        ("submissions", "0007_anonymous_is_nobody"),
        ("worker", "0003_job_dispatched_at"),
    ]

    operations = [migrations.RunPython(rederive, migrations.RunPython.noop)]
