"""manage.py seed_demo: real fixture files plus synthetic demo stacks, marked as demo."""

from __future__ import annotations

import random
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from runs import normalize
from runs.demo import SUBMITTERS, demo_run, demo_stacks
from runs.importers import FormatError, parse_path
from runs.importers.records import RunRecord
from runs.models import Hardware, Run, Stack, SuiteResult
from runs.services import SPEED_FIELDS, fingerprint, import_records, refresh_stack_stats
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
        records = []
        for index, stack in enumerate(demo_stacks(rng, 90)):
            for attempt in range(rng.randint(1, 5)):
                record = demo_run(rng, stack, rng.choice(SUBMITTERS), index=index * 10 + attempt)
                if record:
                    records.append(record)
        result = import_records(records, is_demo=True, source_name="seed_demo")
        self.stdout.write(
            f"synthetic demo runs, marked “demo”: {len(result.created)} runs on "
            f"{len(result.stack_ids)} stacks"
        )
        self.stdout.write(
            f"seeded {real} real and {len(result.created)} synthetic runs"
            + ("" if real else " (synthetic only)")
        )

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
            self._write_batch(records, hardware_cache, stack_cache)
            created += len(records)
            self.stdout.write(f"  {created}/{total} runs", ending="\r")
        refresh_stack_stats(stack_ids=[s.id for s in stack_cache.values()])
        elapsed = time.perf_counter() - started
        self.stdout.write(
            f"created {created} runs on {len(stack_cache)} stacks in {elapsed:.1f} s "
            f"({created / elapsed:.0f} runs/s)"
        )

    @transaction.atomic
    def _write_batch(
        self,
        records: list[RunRecord],
        hardware_cache: dict[str, Hardware],
        stack_cache: dict[str, Stack],
    ) -> None:
        runs = []
        for record in records:
            hw = record.hardware
            assert hw is not None
            hw_fields = dict(
                cpu=hw.cpu,
                gpu=hw.gpu,
                gpu_count=hw.gpu_count,
                vram_gb=hw.vram_gb,
                ram_gb=hw.ram_gb,
                os_name=hw.os_name,
            )
            hw_key = normalize.hardware_identity(**hw_fields)["canonical_key"]
            if hw_key not in hardware_cache:
                hardware_cache[hw_key] = Hardware.for_identity(**hw_fields)
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
                    hardware=hardware_cache[hw_key],
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
                    published=True,
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
                    status=Status.APPROVED,
                    submitter_name=record.submitter_name,
                    client_run_id=record.client_run_id,
                    source_name="seed_demo --runs",
                )
                for run, record in zip(runs, records, strict=True)
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
