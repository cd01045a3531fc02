"""Print the moderators' accelerator additions as entries for runs/data/accelerators.json."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from submissions.models import AcceleratorOverride


class Command(BaseCommand):
    help = (
        "Print moderator-added accelerators as data-file entries (JSON), to be reviewed and "
        "added to runs/data/accelerators.json; the rows can then be deleted."
    )

    def handle(self, *args, **options) -> None:
        rows = AcceleratorOverride.objects.select_related("added_by").order_by("name")
        entries = []
        for row in rows:
            entry = {key: value for key, value in row.as_entry().items() if value is not None}
            who = row.added_by.get_username() if row.added_by is not None else "a moderator"
            entry["note"] = f"added from the moderation queue by {who} on {row.created_at:%Y-%m-%d}"
            entries.append(entry)
        self.stdout.write(json.dumps(entries, indent=2, ensure_ascii=False))
