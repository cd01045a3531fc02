"""Write paths for results: importing records and keeping per-stack statistics current."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from core import pagecache as board_cache
from runs import bulk, lanes, limits, normalize
from runs.importers.records import RunRecord
from runs.models import (
    SPEED_METRICS,
    SPEED_STATS,
    Hardware,
    HardwareClass,
    Outcome,
    Run,
    ScoreScale,
    ScoringMode,
    Stack,
    Visibility,
)
from submissions.models import Channel, Status, Submission

SPEED_FIELDS = [f"{metric}_{stat}" for metric in SPEED_METRICS for stat in SPEED_STATS]


@dataclass
class ImportResult:
    created: list[Run] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def stack_ids(self) -> set[int]:
        return {run.stack_id for run in self.created}


def fingerprint(record: RunRecord) -> str:
    """Identity of a run across formats: its envelope and its run.json share one fingerprint."""
    return normalize.canonical_hash(
        {
            "id": record.client_run_id,
            "at": record.started_at.isoformat(),
            "model": normalize.normalise_model_id(record.model_id),
            "profile": record.profile,
            "manifest": record.manifest_hash,
            "overall": record.overall_score,
            "outcome": record.outcome,
        }
    )


def import_records(
    records: Iterable[RunRecord],
    *,
    channel: str = Channel.IMPORT,
    status: str = Status.APPROVED,
    source_name: str = "",
    is_demo: bool = False,
    is_verified: bool = False,
    refresh_stats: bool = True,
) -> ImportResult:
    """Store every record not already present, atomically; refresh the stacks they touch
    (unless the caller refreshes them itself, once for many files). A record that a column
    cannot hold raises FormatError (runs.limits) and nothing is stored."""
    result = ImportResult()
    with transaction.atomic():
        for record in records:
            limits.check_record(record)
            key = fingerprint(record)
            if Run.objects.filter(fingerprint=key).exists():
                result.skipped.append(record.client_run_id or key[:12])
                continue
            try:
                # A savepoint per run: a concurrent importer that wins the race turns this
                # run into a skip instead of aborting the whole file.
                with transaction.atomic():
                    # Published from its INSERT: one UPDATE less per run than set_published.
                    published = is_public(status, record.visibility, record.outcome)
                    run = create_run(
                        record, key, is_demo=is_demo, is_verified=is_verified, published=published
                    )
                    decided_at = timezone.now() if status == Status.APPROVED else None
                    _submission(
                        run,
                        record,
                        channel=channel,
                        status=status,
                        source_name=source_name,
                        decided_at=decided_at,
                    ).save()
                    if published:
                        board_cache.invalidate()
            except IntegrityError:
                if not Run.objects.filter(fingerprint=key).exists():
                    raise
                result.skipped.append(record.client_run_id or key[:12])
                continue
            result.created.append(run)
        if refresh_stats:
            refresh_stack_stats(stack_ids=result.stack_ids)
    return result


def import_batch(
    files: list[tuple[str, list[RunRecord]]],
    *,
    channel: str = Channel.IMPORT,
    status: str = Status.APPROVED,
) -> list[ImportResult]:
    """Many files' records with one INSERT per table; the same outcome as import_records on
    each file in turn (present or repeated runs are skipped), without refreshing stacks.
    Every record must have passed runs.limits (import_results rejects a file that does not).

    All of it is one savepoint. Should a concurrent importer insert one of these runs first,
    the savepoint is undone and the files go through import_records one at a time.
    """
    try:
        with transaction.atomic():
            return _import_batch(files, channel=channel, status=status)
    except IntegrityError:
        return [
            import_records(
                records, channel=channel, status=status, source_name=name, refresh_stats=False
            )
            for name, records in files
        ]


def _import_batch(
    files: list[tuple[str, list[RunRecord]]], *, channel: str, status: str
) -> list[ImportResult]:
    keys = [[fingerprint(record) for record in records] for _name, records in files]
    present = set(
        Run.objects.filter(
            fingerprint__in=[k for file_keys in keys for k in file_keys]
        ).values_list("fingerprint", flat=True)
    )
    results: list[ImportResult] = []
    new: list[tuple[RunRecord, str, str, ImportResult]] = []
    for (name, records), file_keys in zip(files, keys, strict=True):
        result = ImportResult()
        for record, key in zip(records, file_keys, strict=True):
            if key in present:
                result.skipped.append(record.client_run_id or key[:12])
                continue
            present.add(key)
            new.append((record, key, name, result))
        results.append(result)
    identities = resolve_identities([record for record, *_rest in new])
    runs = []
    class_ids: dict[str, int] = {}  # the classes of runs without a machine, found once each
    for (record, key, _name, _result), (stack, hardware) in zip(new, identities, strict=True):
        published = is_public(status, record.visibility, record.outcome)
        runs.append(
            _new_run(
                record,
                key,
                stack=stack,
                hardware=hardware,
                is_demo=False,
                is_verified=False,
                published=published,
                class_ids=class_ids,
            )
        )
    bulk.save_runs([(run, record.suites) for run, (record, *_rest) in zip(runs, new, strict=True)])
    decided_at = timezone.now() if status == Status.APPROVED else None
    bulk.insert_instances(
        [
            _submission(
                run, record, channel=channel, status=status, source_name=name, decided_at=decided_at
            )
            for run, (record, _key, name, _result) in zip(runs, new, strict=True)
        ]
    )
    for run, (*_rest, result) in zip(runs, new, strict=True):
        result.created.append(run)
    if any(run.published for run in runs):
        board_cache.invalidate()
    return results


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
    machine = ""
    if record.hardware is not None:
        machine = normalize.hardware_identity(**_hardware_fields(record))["canonical_key"]
    return normalize.stack_identity(**_stack_fields(record)), machine


def create_run(
    record: RunRecord,
    key: str,
    *,
    identity: tuple[Stack, Hardware | None] | None = None,
    is_demo: bool = False,
    is_verified: bool = False,
    published: bool = False,
) -> Run:
    """The run with its hardware, stack, suites, tasks and samples (no submission)."""
    stack, hardware = identity or run_identity(record)
    run = _new_run(
        record,
        key,
        stack=stack,
        hardware=hardware,
        is_demo=is_demo,
        is_verified=is_verified,
        published=published,
    )
    bulk.save_runs([(run, record.suites)])
    return run


def _hardware_for(record: RunRecord) -> Hardware | None:
    if record.hardware is None:
        return None
    return Hardware.for_identity(**_hardware_fields(record))


def _hardware_fields(record: RunRecord) -> dict:
    hw = record.hardware
    return {
        "cpu": hw.cpu,
        "gpu": hw.gpu,
        "gpu_count": hw.gpu_count,
        "vram_gb": hw.vram_gb,
        "ram_gb": hw.ram_gb,
        "os_name": hw.os_name,
        "memory_channels": hw.memory_channels,
    }


def _stack_fields(record: RunRecord) -> dict:
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
    }


def _stack_for(record: RunRecord) -> Stack:
    return Stack.for_identity(**_stack_fields(record))


def _submission(
    run: Run, record: RunRecord, *, channel: str, status: str, source_name: str, decided_at
) -> Submission:
    """The unsaved submission row that records where an imported run came from."""
    return Submission(
        run=run,
        channel=channel,
        status=status,
        client_run_id=record.client_run_id,
        submitter_name=record.submitter_name,
        source_name=source_name[:255],
        decided_at=decided_at,
    )


def _new_run(
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
    machine, the remote endpoint's or the unknown-hardware class)."""
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
        speed_score=record.speed_score if scored else None,
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
        visibility=record.visibility,
        is_demo=is_demo,
        # A lab run measured while other work loaded the machine is not published as verified.
        is_verified=is_verified and record.contention_status != "contended",
        published=published,
        raw_payload=record.raw_payload,
        **{name: record.speed.get(name) for name in SPEED_FIELDS},
    )


def machineless_class_fields(record: RunRecord) -> dict:
    """The class of a run no machine was recorded for: a remote endpoint's (by provider) when
    it was scored remotely, else unknown hardware."""
    if record.scoring_mode == ScoringMode.REMOTE:
        return normalize.remote_class(record.provider)
    return normalize.unknown_class()


def _machineless_class(record: RunRecord, class_ids: dict[str, int] | None) -> int:
    fields = machineless_class_fields(record)
    cache = {} if class_ids is None else class_ids
    if fields["key"] not in cache:
        cache[fields["key"]] = HardwareClass.for_fields(fields).pk
    return cache[fields["key"]]


def is_public(status: str, visibility: str, outcome: str) -> bool:
    """Whether a run with this moderation status, visibility and outcome is on public pages."""
    return (
        status == Status.APPROVED
        and visibility == Visibility.PUBLIC
        and outcome == Outcome.COMPLETE
    )


def set_published(run: Run, status: str) -> None:
    """Keep the denormalised `published` flag in step with moderation and visibility."""
    published = is_public(status, run.visibility, run.outcome)
    if published != run.published:
        run.published = published
        run.save(update_fields=["published"])
        board_cache.invalidate()


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
        lanes.refresh_lanes(ids)
        refreshed = _refresh_stack_rows(ids)
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
    cutoff = timezone.now() - timezone.timedelta(hours=older_than_hours)
    ids = list(
        Stack.objects.filter(Q(stats_refreshed_at__lt=cutoff) | Q(stats_refreshed_at=None))
        .order_by("stats_refreshed_at")
        .values_list("id", flat=True)[:limit]
    )
    return refresh_stack_stats(stack_ids=ids)
