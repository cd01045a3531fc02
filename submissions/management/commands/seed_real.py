"""manage.py seed_real: a fresh install's data, all of it real (README command 1)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from runs import methods
from runs.models import Run
from submissions.seeding import (
    describe,
    import_fixture_files,
    import_real_data,
    join_unsized_classes,
    site_figures,
)


class Command(BaseCommand):
    help = (
        "Import the community measurements in BENCHLOOP_REAL_DATA_DIR and the earlier "
        "product's run files in BENCHLOOP_FIXTURES_DIR, once. Nothing synthetic."
    )

    def handle(self, *args, **options) -> None:
        if Run.objects.filter(method__in=methods.IMPORTED_METHODS).exists():
            self.stdout.write("real data already present; nothing to do")
            return
        fixtures = import_fixture_files(self.stdout)
        self.stdout.write("community measurements (imported, not verified):")
        created = import_real_data(self.stdout)
        for line in describe(created):
            self.stdout.write(line)
        self.stdout.write(f"seeded {fixtures + sum(created.values())} real runs, none synthetic")
        join_unsized_classes()
        self.stdout.write(site_figures())
