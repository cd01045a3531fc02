"""manage.py seed_demo: real fixture files plus synthetic demo stacks, marked as demo (for the
page tests and scale benchmarks; a fresh install seeds real data only: seed_real)."""

from __future__ import annotations

import random
import time

from django.core.management.base import BaseCommand, CommandParser
from django.db import connection, transaction

from runs.demo import (
    HARDWARE,
    SUBMITTERS,
    DemoHardware,
    demo_run,
    demo_stacks,
    fits,
    machines_for,
)
from runs.importers.records import RunRecord
from runs.models import Run
from runs.services import refresh_stack_stats
from submissions.intake import NewRun, import_records, store_runs
from submissions.models import Channel, Status
from submissions.seeding import import_fixture_files, join_unsized_classes, site_figures

BATCH = 2000
REJECTED_SHARE = 0.05
# How the small demo's uploads fared: the flagged and rejected ones are attempts, not runs.
DEMO_STATUSES: dict[str, float] = {
    Status.APPROVED: 0.88,
    Status.FLAGGED: 0.04,
    Status.REJECTED: 0.08,
}


class Command(BaseCommand):
    help = "Fill an empty database with demo data; --runs N adds N synthetic runs for scale tests."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs", type=int, default=0, help="bulk-create N synthetic runs")
        parser.add_argument("--seed", type=int, default=20261130)

    def handle(self, *args, runs: int, seed: int, **options) -> None:
        rng = random.Random(seed)
        if runs:
            self._bulk(rng, runs)
            return
        if Run.objects.filter(is_demo=True).exists():
            self.stdout.write("demo data already present; nothing to do")
            return
        real = import_fixture_files(self.stdout)
        by_status: dict[str, list[RunRecord]] = {status: [] for status in DEMO_STATUSES}
        for record in self._demo_records(rng):
            status = rng.choices(list(DEMO_STATUSES), weights=list(DEMO_STATUSES.values()))[0]
            by_status[status].append(record)
        created, stack_ids = 0, set()
        for status, records in by_status.items():
            result = import_records(records, status=status, is_demo=True, source_name="seed_demo")
            created += len(result.created)
            stack_ids |= result.stack_ids
        self.stdout.write(
            f"synthetic demo runs, marked “demo”: {created} runs on {len(stack_ids)} stacks"
        )
        self.stdout.write(
            f"seeded {real} real and {created} synthetic runs"
            + ("" if real else " (synthetic only)")
        )
        join_unsized_classes()
        self.stdout.write(site_figures())

    def _demo_records(self, rng: random.Random) -> list[RunRecord]:
        """Each demo stack on one to three machines, a few runs on each, so stack pages have
        lanes with enough runs for a median; every demo machine carries at least one stack."""
        stacks = demo_stacks(rng, 90)
        chosen: list[list[DemoHardware]] = []
        for stack in stacks:
            machines = machines_for(stack)
            chosen.append(rng.sample(machines, min(len(machines), rng.randint(1, 3))))
        for hardware in HARDWARE:
            if not any(hardware in machines for machines in chosen):
                fitting = [i for i, stack in enumerate(stacks) if fits(hardware, stack)]
                if fitting:
                    chosen[rng.choice(fitting)].append(hardware)
        records = []
        for number, (stack, machines) in enumerate(zip(stacks, chosen, strict=True)):
            for place, hardware in enumerate(machines):
                for attempt in range(rng.choice([1, 1, 2, 3, 4, 6])):
                    index = number * 100 + place * 10 + attempt
                    record = demo_run(
                        rng, stack, rng.choice(SUBMITTERS), index=index, hardware=hardware
                    )
                    if record:
                        records.append(record)
        return records

    def _bulk(self, rng: random.Random, total: int) -> None:
        started = time.perf_counter()
        stacks = demo_stacks(rng, max(50, min(3000, total // 40)))
        offset = Run.objects.count()
        created = 0
        stack_ids: set[int] = set()
        while created < total:
            records: list[RunRecord] = []
            while len(records) < min(BATCH, total - created):
                record = demo_run(
                    rng,
                    rng.choice(stacks),
                    rng.choice(SUBMITTERS),
                    index=offset + created + len(records),
                )
                if record:
                    record.client_run_id = f"bulk-{offset + created + len(records)}"
                    records.append(record)
            # Some uploads are turned down: attempts that count, runs that do not.
            statuses = [
                Status.REJECTED if rng.random() < REJECTED_SHARE else Status.APPROVED
                for _ in records
            ]
            with transaction.atomic():
                stored = store_runs(
                    [
                        NewRun(
                            record=record,
                            channel=Channel.IMPORT,
                            status=status,
                            submitter_name=record.submitter_name,
                            source_name="seed_demo --runs",
                            is_demo=True,
                        )
                        for record, status in zip(records, statuses, strict=True)
                    ]
                )
            stack_ids |= {submission.run.stack_id for submission in stored}
            created += len(records)
            self.stdout.write(f"  {created}/{total} runs", ending="\r")
        written = time.perf_counter()
        refresh_stack_stats(stack_ids=stack_ids)
        # Fresh planner statistics: until autovacuum gets to a bulk load, Postgres plans the
        # board's lane queries for empty tables (a three-filter view took 430 ms, then 84 ms).
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        elapsed = time.perf_counter() - started
        self.stdout.write(
            f"created {created} runs on {len(stack_ids)} stacks in {elapsed:.1f} s "
            f"({created / elapsed:.0f} runs/s; lanes and stack figures "
            f"{time.perf_counter() - written:.1f} s of it)"
        )
