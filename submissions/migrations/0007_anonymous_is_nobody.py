"""Imported rows credited to "anonymous" (in any spelling) are credited to nobody.

Such a name had a public page that any account signing up as "anonymous" took over. After
this, "anonymous" runs have no page, and sign-up reserves the word (runs.names).
"""

from __future__ import annotations

from django.db import migrations


def forget_anonymous_names(apps, schema_editor):
    from runs.names import is_anonymous

    Submission = apps.get_model("submissions", "Submission")
    names = (
        Submission.objects.filter(submitter__isnull=True)
        .exclude(submitter_name="")
        .values_list("submitter_name", flat=True)
        .distinct()
    )
    anonymous = [name for name in names if is_anonymous(name)]
    if anonymous:
        Submission.objects.filter(submitter__isnull=True, submitter_name__in=anonymous).update(
            submitter_name=""
        )


class Migration(migrations.Migration):
    dependencies = [("submissions", "0006_run_report_resolution")]

    operations = [migrations.RunPython(forget_anonymous_names, migrations.RunPython.noop)]
