"""Small builders for leaderboard tests: runs imported through the real service."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from runs import normalize
from runs.importers.records import (
    HardwareRecord,
    ImportedSuite,
    ImportedTask,
    RunRecord,
    SampleRecord,
)
from runs.models import HardwareClass, Lane, Run, Stack
from runs.services import refresh_stack_stats
from submissions.intake import import_records

_counter = itertools.count(1)
HOSTILE = "<script>alert(1)</script>\"onmouseover=alert(2) x='"


def _suites_with_tasks() -> list[ImportedSuite]:
    """A speed task with trials and a failed tool call, each with private output and metadata."""
    return [
        ImportedSuite(
            suite="speed",
            score=70.0,
            task_count=1,
            pass_count=1,
            tasks=[
                ImportedTask(
                    task_id="speed-short-001",
                    passed=True,
                    score=70.0,
                    latency_ms=480.0,
                    execution_ok=True,
                    output="SECRET MODEL OUTPUT",
                    error="",
                    metadata={"selection_method": "median", "turns": ["private words"]},
                    samples=[
                        SampleRecord(trial_index=1, is_warmup=True, decode_tps=40.0),
                        SampleRecord(trial_index=2, decode_tps=50.0, ttft_ms=35.0),
                    ],
                )
            ],
        ),
        ImportedSuite(
            suite="toolcall",
            score=0.0,
            task_count=1,
            tasks=[
                ImportedTask(
                    task_id="tc-01",
                    passed=False,
                    score=0.0,
                    execution_ok=True,
                    error="PRIVATE ERROR TEXT",
                    output="PRIVATE OUTPUT TEXT",
                    metadata={"evaluation_status": "fail", "answer_line": "PRIVATE LINE"},
                )
            ],
        ),
    ]


def record(
    *,
    model_id: str = "qwen3:8b",
    quantization: str = "Q4_K_M",
    engine: str = "llama.cpp",
    gpu: str = "NVIDIA GeForce RTX 4090",
    vram_gb: float | None = 24,
    cpu: str = "AMD Ryzen 9 7950X",
    ram_gb: float | None = 64,
    os_name: str = "Linux",
    overall: float | None = 60.0,
    quality: float | None = 55.0,
    decode: float | None = 50.0,
    stdev: float = 1.0,
    submitter: str = "ada",
    score_scale: str = "v3",
    comparable: bool = True,
    days_ago: float = 1.0,
    remote: bool = False,
    with_tasks: bool = False,
    **extra,
) -> RunRecord:
    """One plausible v3 run; keyword arguments override what a test is about."""
    n = next(_counter)
    suites = [ImportedSuite(suite="toolcall", score=quality, task_count=10, pass_count=6)]
    if with_tasks:
        suites = _suites_with_tasks()
    return RunRecord(
        source_format="run-v3",
        started_at=datetime.now(UTC) - timedelta(days=days_ago, seconds=n),
        client_run_id=f"test-{n}",
        model_id=model_id,
        quantization=quantization,
        engine=engine,
        engine_version=extra.pop("engine_version", "b6512"),
        score_scale=score_scale,
        comparable=comparable,
        profile="core",
        overall_score=overall if score_scale != "speed" else None,
        quality_score=quality if score_scale != "speed" else None,
        speed_score=60.0 if score_scale != "speed" else None,
        reliability_score=100.0 if score_scale != "speed" else None,
        value_score=20.0 if score_scale != "speed" else None,
        scoring_mode="remote" if remote else "local",
        hardware=None
        if remote
        else HardwareRecord(cpu=cpu, gpu=gpu, vram_gb=vram_gb, ram_gb=ram_gb, os_name=os_name),
        speed={
            "decode_tps_median": decode,
            "decode_tps_mean": decode,
            "decode_tps_stdev": stdev,
            "decode_tps_p5": decode - 2 * stdev if decode else None,
            "decode_tps_p95": decode + 2 * stdev if decode else None,
            "ttft_ms_median": 120.0,
            "prefill_tps_median": 900.0,
        },
        speed_sample_count=10,
        submitter_name=submitter,
        suites=suites,
        raw_payload={"endpoint": "http://10.1.2.3:8080/v1", "machine_id": "RAWPAYLOADMARKER"},
        **extra,
    )


def add_runs(*records: RunRecord, verified: bool = False) -> list[Run]:
    created = import_records(list(records), is_verified=verified).created
    ensure_lanes()
    return created


# --- hardware classes and lanes -------------------------------------------------------------
# Classes and lanes made by hand, for tests about how stored rows are shown.


def hardware_class(
    *,
    chip: str = "RTX 4090",
    kind: str = "gpu",
    count: int = 1,
    memory_gb: float | None = 24,
    vendor: str = "nvidia",
    label: str = "",
    slug: str = "",
) -> HardwareClass:
    """A hardware class (get or create by its identity)."""
    key = f"{kind}|{normalize.slug(chip)}|{count}|{f'{memory_gb:g}' if memory_gb else '-'}"
    if not label:
        label = chip if count == 1 else f"{count}× {chip}"
        if memory_gb and kind != "remote":
            label = f"{label} {memory_gb:g} GB"
        if kind == "cpu":
            label = f"CPU only: {label}"
    slug = slug or normalize.slug(chip if count == 1 else f"{count}x {chip}")
    if HardwareClass.objects.filter(slug=slug).exclude(key=key).exists():
        slug = f"{slug}-{memory_gb or 0:g}gb"
    found, _ = HardwareClass.objects.get_or_create(
        key=key,
        defaults={
            "slug": slug,
            "kind": kind,
            "label": label,
            "vendor": vendor,
            "chip": chip,
            "count": count,
            "memory_gb": memory_gb,
        },
    )
    return found


def lane(stack: Stack, hw: HardwareClass | None, *, best_run: Run, **fields) -> Lane:
    """One stored lane with the given figures (for tests about how rows are shown)."""
    defaults = {
        "score_scale": best_run.score_scale,
        "benchmark_version": best_run.benchmark_version,
    }
    defaults.update(run_count=1, submitter_count=1, attempt_count=1)
    defaults.update(fields)
    return Lane.objects.create(stack=stack, hardware_class=hw, best_run=best_run, **defaults)


def ensure_lanes() -> None:
    """Rebuild every stack's lanes with the real service (runs.services), as moderation does."""
    refresh_stack_stats(stack_ids=list(Stack.objects.values_list("id", flat=True)))
