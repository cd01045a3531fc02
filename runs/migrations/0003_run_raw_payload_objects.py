"""Runs imported through COPY before this fix stored their payload as a JSON string holding the
document's text; store the document itself. Only Postgres took the COPY path."""

from django.db import migrations


def unwrap_string_payloads(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        "UPDATE runs_run SET raw_payload = (raw_payload #>> '{}')::jsonb "
        "WHERE jsonb_typeof(raw_payload) = 'string'"
    )


class Migration(migrations.Migration):
    dependencies = [("runs", "0002_run_run_verified_recent_idx")]

    operations = [migrations.RunPython(unwrap_string_payloads, migrations.RunPython.noop)]
