"""manage.py seed_demo: real fixture files plus synthetic demo stacks, marked as demo."""

from __future__ import annotations

import random
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection, transaction

from runs import normalize
from runs.demo import (
    HARDWARE,
    SUBMITTERS,
    DemoHardware,
    demo_run,
    demo_stacks,
    fits,
    machines_for,
)
from runs.importers import FormatError, parse_path
from runs.importers.records import RunRecord
from runs.models import Hardware, HardwareClass, Run, Stack, SuiteResult
from runs.services import (
    SPEED_FIELDS,
    fingerprint,
    import_records,
    machineless_class_fields,
    refresh_stack_stats,
)
from submissions.models import Channel, Status, Submission

# leaderboard.json is left out: its source repository has no licence (tests only).
FIXTURE_FILES = [
    "leaderboard-v1.json",
    "generated/v3-full-local/run.json",
    "generated/v3-smoke-local-run.json",
    "generated/v3-custom-remote/run.json",
    "generated/v2-0.2.3-local/run.json",
    "generated/bench_results.jsonl",
]
BATCH = 2000
REJECTED_SHARE = 0.05
# How the small demo's uploads fared: the flagged and rejected ones are attempts, not runs.
DEMO_STATUSES = {Status.APPROVED: 0.88, Status.FLAGGED: 0.04, Status.REJECTED: 0.08}


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
        real = self._fixtures()
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

    def _fixtures(self) -> int:
        """Import the earlier product's real data files; the number of runs imported."""
        base = Path(settings.BENCHLOOP_FIXTURES_DIR)
        if not base.is_dir():
            self.stdout.write(
                f"no fixture folder at {base}: no real runs imported. Set "
                "BENCHLOOP_FIXTURES_DIR to a copy of the earlier product's data files "
                "(shared/fixtures/benchloop) to add its real runs."
            )
            return 0
        self.stdout.write(f"real runs from the earlier product's data files in {base}:")
        imported = 0
        for name in FIXTURE_FILES:
            path = base / name
            if not path.exists():
                self.stdout.write(f"  {name}: missing, skipped")
                continue
            try:
                records = parse_path(path)
            except FormatError as exc:
                self.stderr.write(f"  skipped {path}: {exc}")
                continue
            result = import_records(records, source_name=path.name)
            imported += len(result.created)
            self.stdout.write(f"  {name}: {len(result.created)} runs")
        return imported

    def _bulk(self, rng: random.Random, total: int) -> None:
        started = time.perf_counter()
        stacks = demo_stacks(rng, max(50, min(3000, total // 40)))
        offset = Run.objects.count()
        created = 0
        self._class_ids: dict[str, int] = {}
        hardware_cache: dict[str, Hardware] = {}
        stack_cache: dict[str, Stack] = {}
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
            rejected = [rng.random() < REJECTED_SHARE for _ in records]
            self._write_batch(records, hardware_cache, stack_cache, rejected)
            created += len(records)
            self.stdout.write(f"  {created}/{total} runs", ending="\r")
        written = time.perf_counter()
        refresh_stack_stats(stack_ids=[s.id for s in stack_cache.values()])
        # Fresh planner statistics: until autovacuum gets to a bulk load, Postgres plans the
        # board's lane queries for empty tables (a three-filter view took 430 ms, then 84 ms).
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        elapsed = time.perf_counter() - started
        self.stdout.write(
            f"created {created} runs on {len(stack_cache)} stacks in {elapsed:.1f} s "
            f"({created / elapsed:.0f} runs/s; lanes and stack figures "
            f"{time.perf_counter() - written:.1f} s of it)"
        )

    def _machine(
        self, record: RunRecord, hardware_cache: dict[str, Hardware]
    ) -> tuple[Hardware | None, int]:
        """The record's machine (None for a remote endpoint) and its hardware class's id."""
        hw = record.hardware
        if hw is None:
            fields = machineless_class_fields(record)
            key = f"class:{fields['key']}"
            if key not in self._class_ids:
                self._class_ids[key] = HardwareClass.for_fields(fields).pk
            return None, self._class_ids[key]
        hw_fields = dict(
            cpu=hw.cpu,
            gpu=hw.gpu,
            gpu_count=hw.gpu_count,
            vram_gb=hw.vram_gb,
            ram_gb=hw.ram_gb,
            os_name=hw.os_name,
            memory_channels=hw.memory_channels,
        )
        hw_key = normalize.hardware_identity(**hw_fields)["canonical_key"]
        if hw_key not in hardware_cache:
            hardware_cache[hw_key] = Hardware.for_identity(**hw_fields)
        hardware = hardware_cache[hw_key]
        return hardware, hardware.hardware_class_id

    @transaction.atomic
    def _write_batch(
        self,
        records: list[RunRecord],
        hardware_cache: dict[str, Hardware],
        stack_cache: dict[str, Stack],
        rejected: list[bool],
    ) -> None:
        runs = []
        for record, is_rejected in zip(records, rejected, strict=True):
            hardware, class_id = self._machine(record, hardware_cache)
            stack_fields = dict(
                model_id=record.model_id,
                quantization=record.quantization,
                model_sha256="",
                engine=record.engine,
                harness=record.harness,
                context_length=record.context_length,
                kv_cache_type="",
                draft_model="",
                launch_settings={},
            )
            stack_key = normalize.stack_identity(**stack_fields)
            if stack_key not in stack_cache:
                stack_cache[stack_key] = Stack.for_identity(**stack_fields)
            runs.append(
                Run(
                    stack=stack_cache[stack_key],
                    hardware=hardware,
                    hardware_class_id=class_id,
                    fingerprint=fingerprint(record),
                    client_run_id=record.client_run_id,
                    benchmark_version=record.benchmark_version,
                    profile=record.profile,
                    requested_profile=record.requested_profile,
                    score_schema_version=record.score_schema_version,
                    score_scale="v3",
                    manifest_hash=record.manifest_hash,
                    coverage_score=100.0,
                    comparable=True,
                    scoring_mode=record.scoring_mode,
                    overall_score=record.overall_score,
                    quality_score=record.quality_score,
                    speed_score=record.speed_score,
                    reliability_score=record.reliability_score,
                    value_score=record.value_score,
                    speed_sample_count=record.speed_sample_count,
                    provider=record.provider,
                    engine_version=record.engine_version,
                    harness_version="v1",
                    started_at=record.started_at,
                    total_runtime_sec=record.total_runtime_sec,
                    source_format="demo",
                    published=not is_rejected,
                    is_demo=True,
                    raw_payload={"demo": True},
                    **{name: record.speed.get(name) for name in SPEED_FIELDS},
                )
            )
        runs = Run.objects.bulk_create(runs, batch_size=BATCH)
        Submission.objects.bulk_create(
            [
                Submission(
                    run=run,
                    channel=Channel.IMPORT,
                    status=Status.REJECTED if is_rejected else Status.APPROVED,
                    submitter_name=record.submitter_name,
                    client_run_id=record.client_run_id,
                    source_name="seed_demo --runs",
                )
                for run, record, is_rejected in zip(runs, records, rejected, strict=True)
            ],
            batch_size=BATCH,
        )
        SuiteResult.objects.bulk_create(
            [
                SuiteResult(
                    run=run,
                    suite=s.suite,
                    score=s.score,
                    task_count=s.task_count,
                    pass_count=s.pass_count,
                    fail_count=s.task_count - s.pass_count,
                )
                for run, record in zip(runs, records, strict=True)
                for s in record.suites
            ],
            batch_size=BATCH * 5,
        )
