"""Data-level builders for stored runs (their identity, their row) and the per-stack statistics.

Storing a run with its submission is submissions.intake.store_runs, the one write path."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from core import pagecache as board_cache
from runs import lanes, methods, normalize, signals
from runs.importers.records import HardwareRecord, RunRecord
from runs.models import (
    SPEED_METRICS,
    SPEED_STATS,
    Hardware,
    HardwareClass,
    Lane,
    Outcome,
    Run,
    ScoreScale,
    ScoringMode,
    Stack,
)

SPEED_FIELDS = [f"{metric}_{stat}" for metric in SPEED_METRICS for stat in SPEED_STATS]
LIVE_LANES = lanes.LaneModels(run=Run, lane=Lane, hardware_class=HardwareClass)


def fingerprint(record: RunRecord) -> str:
    """Identity of a run across formats: its envelope and its run.json share one fingerprint."""
    return normalize.canonical_hash(
        {
            "id": record.client_run_id,
            # A table with no time in it (llama-bench's Markdown) is dated when it is read:
            # its id, worked out from its content, is what makes it the same run again.
            "at": "" if "started_at" in record.sources else record.started_at.isoformat(),
            "model": normalize.normalise_model_id(record.model_id),
            "profile": record.profile,
            "manifest": record.manifest_hash,
            "overall": record.overall_score,
            "outcome": record.outcome,
        }
    )


def run_identity(record: RunRecord) -> tuple[Stack, Hardware | None]:
    """The stack and the machine a record belongs to, each created the first time it is seen."""
    return resolve_identities([record])[0]


def resolve_identities(records: list[RunRecord]) -> list[tuple[Stack, Hardware | None]]:
    """Each record's (stack, machine). Most records share a few of each: those that exist are
    found with one query per table, the others created once each (in a short transaction of
    their own when called outside one)."""
    keys = [_identity_keys(record) for record in records]
    stacks = Stack.objects.in_bulk({stack for stack, _ in keys}, field_name="comparability_key")
    machines: dict[str, Hardware | None] = {"": None}
    machines.update(Hardware.objects.in_bulk({m for _, m in keys if m}, field_name="canonical_key"))
    found = []
    classes: dict[str, int] = {}
    for record, (stack_key, machine_key) in zip(records, keys, strict=True):
        if stack_key not in stacks:
            stacks[stack_key] = _stack_for(record)
        if not machine_key:  # the class of a run without a machine exists before its writer
            _machineless_class(record, classes)
        machine = machines.get(machine_key)
        if machine_key not in machines or (machine is not None and not machine.hardware_class_id):
            machines[machine_key] = _hardware_for(record)  # (a machine without a class gets one)
        found.append((stacks[stack_key], machines[machine_key]))
    return found


def _identity_keys(record: RunRecord) -> tuple[str, str]:
    """The record's stack key and machine key ("" without hardware), as the models store them."""
    machine = machine_identity(record)
    return normalize.stack_identity(**_stack_fields(record)), machine[
        "canonical_key"
    ] if machine else ""


def machine_identity(record: RunRecord) -> normalize.HardwareIdentity | None:
    """The normalised machine a record names (Hardware's fields and its canonical key), or
    None when it names none (a remote endpoint's run)."""
    if record.hardware is None:
        return None
    return normalize.hardware_identity(**_hardware_fields(record.hardware))


def _hardware_for(record: RunRecord) -> Hardware | None:
    if record.hardware is None:
        return None
    return Hardware.for_identity(**_hardware_fields(record.hardware))


def _hardware_fields(hw: HardwareRecord) -> normalize.MachineDescription:
    return {
        "cpu": hw.cpu,
        "gpu": hw.gpu,
        "gpu_count": hw.gpu_count,
        "vram_gb": hw.vram_gb,
        "ram_gb": hw.ram_gb,
        "os_name": hw.os_name,
        "memory_channels": hw.memory_channels,
    }


def _stack_fields(record: RunRecord) -> normalize.StackDescription:
    return {
        "model_id": record.model_id,
        "quantization": record.quantization,
        "model_sha256": record.model_sha256,
        "engine": record.engine,
        "harness": record.harness,
        "context_length": record.context_length,
        "kv_cache_type": record.kv_cache_type,
        "draft_model": record.draft_model,
        "launch_settings": record.launch_settings,
        "method": record.method,
    }


def _stack_for(record: RunRecord) -> Stack:
    return Stack.for_identity(**_stack_fields(record))


def new_run(
    record: RunRecord,
    key: str,
    *,
    stack: Stack,
    hardware: Hardware | None,
    is_demo: bool,
    is_verified: bool,
    published: bool,
    class_ids: dict[str, int] | None = None,
) -> Run:
    """The unsaved run row for a record, in its machine's hardware class (or, without a
    machine, the remote endpoint's or the unknown-hardware class): the one place a stored
    run's columns are worked out from its record (submissions.intake stores it).

    `class_ids` caches the machineless classes across the runs of one batch."""
    scored = record.outcome == Outcome.COMPLETE and record.score_scale != ScoreScale.SPEED_ONLY
    return Run(
        stack=stack,
        hardware=hardware,
        hardware_class_id=(
            hardware.hardware_class_id if hardware else _machineless_class(record, class_ids)
        ),
        fingerprint=key,
        client_run_id=record.client_run_id,
        benchmark_id=record.benchmark_id,
        benchmark_version=record.benchmark_version,
        speed_version=methods.speed_version(
            record.method, record.source_format, record.speed_version
        ),
        profile=record.profile,
        requested_profile=record.requested_profile,
        score_schema_version=record.score_schema_version,
        score_scale=record.score_scale,
        manifest_hash=record.manifest_hash,
        coverage_score=record.coverage_score,
        comparable=record.comparable and record.outcome == Outcome.COMPLETE,
        noncomparable_reasons=record.noncomparable_reasons,
        contention_status=record.contention_status,
        scoring_mode=record.scoring_mode,
        overall_score=record.overall_score if scored else None,
        quality_score=record.quality_score if scored else None,
        # A speed-only run has its speed suite's score (the receipts show it) but no other.
        speed_score=record.speed_score if record.outcome == Outcome.COMPLETE else None,
        reliability_score=record.reliability_score if scored else None,
        value_score=record.value_score if scored else None,
        speed_sample_count=record.speed_sample_count,
        provider=record.provider,
        engine_version=record.engine_version,
        harness_version=record.harness_version,
        command_used=record.command_used,
        outcome=record.outcome,
        error=record.error,
        started_at=record.started_at,
        total_runtime_sec=record.total_runtime_sec,
        source_format=record.source_format,
        method=record.method,
        provenance=record.provenance,
        visibility=record.visibility,
        is_demo=is_demo,
        # A lab run measured while other work loaded the machine is not published as verified.
        is_verified=is_verified and record.contention_status != "contended",
        published=published,
        raw_payload=record.raw_payload,
        **{name: record.speed.get(name) for name in SPEED_FIELDS},
    )


def machineless_class_fields(record: RunRecord) -> normalize.HardwareClassFields:
    """The class of a run no machine was recorded for: a remote endpoint's (by provider) when
    it was scored remotely, else unknown hardware."""
    if record.scoring_mode == ScoringMode.REMOTE:
        return normalize.remote_class(record.provider)
    return normalize.unknown_class()


def _machineless_class(record: RunRecord, class_ids: dict[str, int] | None) -> int:
    fields = machineless_class_fields(record)
    cache: dict[str, int] = {} if class_ids is None else class_ids
    if fields["key"] not in cache:
        cache[fields["key"]] = HardwareClass.for_fields(fields).pk
    return cache[fields["key"]]


# Which published run represents a stack: comparable v3 first, then legacy v2, then speed-only.
_BEST_RUN_ORDER = [
    (Q(score_scale=ScoreScale.V3, comparable=True), "overall_score"),
    (Q(score_scale=ScoreScale.V2), "overall_score"),
    (Q(score_scale=ScoreScale.SPEED_ONLY), "decode_tps_median"),
]


def refresh_stack_stats(*, stack_ids: Iterable[int]) -> int:
    """Recompute each stack's lanes (runs.lanes) and its stack-wide best run and counts from
    its published runs, holding the stacks' rows so two refreshes of one stack never
    interleave."""
    ids = sorted(set(stack_ids))
    if not ids:
        return 0
    with transaction.atomic():
        list(Stack.objects.select_for_update().filter(id__in=ids).order_by("id").values_list("id"))
        changed: set[lanes.ClassBoardKey] = set()
        lanes.refresh_lanes(ids, models=LIVE_LANES, changed=changed)
        refreshed = _refresh_stack_rows(ids)
        if changed:
            signals.lanes_changed.send(sender=Lane, boards=changed)
    board_cache.invalidate()  # the leaderboard reads lanes and best runs
    return refreshed


def _refresh_stack_rows(ids: list[int]) -> int:
    """Stack.best_run, published_run_count and submitter_count (kept for the pages that still
    read them; the lanes hold the same per hardware class)."""
    counts = {
        row["stack_id"]: row
        for row in Run.objects.published()
        .filter(stack_id__in=ids)
        .values("stack_id")
        .annotate(
            runs=Count("id"),
            submitters=Count(
                "submission__submitter_name", distinct=True, filter=Q(submission__submitter=None)
            )
            + Count("submission__submitter", distinct=True),
        )
    }
    best: dict[int, int] = {}
    for condition, order in _BEST_RUN_ORDER:
        remaining = [i for i in ids if i not in best]
        if not remaining:
            break
        rows = (
            Run.objects.published()
            .filter(condition, stack_id__in=remaining)
            .order_by("stack_id", F(order).desc(nulls_last=True), "-started_at", "id")
            .values_list("stack_id", "id")
        )
        for stack_id, run_id in rows:
            best.setdefault(stack_id, run_id)
    now = timezone.now()
    stacks = list(Stack.objects.filter(id__in=ids))
    for stack in stacks:
        row = counts.get(stack.id, {})
        stack.best_run_id = best.get(stack.id)
        stack.published_run_count = row.get("runs", 0)
        stack.submitter_count = row.get("submitters", 0)
        stack.stats_refreshed_at = now
    Stack.objects.bulk_update(
        stacks,
        ["best_run", "published_run_count", "submitter_count", "stats_refreshed_at"],
        batch_size=1000,
    )
    return len(stacks)


def refresh_stale_stack_stats(*, older_than_hours: int = 24, limit: int = 5000) -> int:
    cutoff = timezone.now() - timedelta(hours=older_than_hours)
    ids = list(
        Stack.objects.filter(Q(stats_refreshed_at__lt=cutoff) | Q(stats_refreshed_at=None))
        .order_by("stats_refreshed_at")
        .values_list("id", flat=True)[:limit]
    )
    return refresh_stack_stats(stack_ids=ids)
