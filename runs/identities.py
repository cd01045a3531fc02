"""Re-deriving stored identities: machines and their classes, stacks, each run's class.

The data migration that introduced hardware classes runs these on its historical models
(`Models`); they work on SQLite and PostgreSQL and touch runs only through set-based UPDATEs
over id ranges, so a table of millions of runs is never loaded. Machines and stacks are far
fewer (one row per distinct description) and are re-derived in memory.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.apps.registry import Apps
from django.db.models import OuterRef, Q, Subquery

from runs import normalize

RUN_BATCH = 50_000  # run ids per UPDATE
ROW_BATCH = 1000
# A stored row as .values() reads it.
Row = dict[str, Any]

HARDWARE_FIELDS = (
    "cpu_model",
    "gpu_model",
    "gpu_vendor",
    "gpu_count",
    "vram_gb",
    "ram_gb",
    "memory_channels",
    "os",
    "accelerator",
    "vram_bucket",
    "ram_bucket",
)
STACK_FIELDS = (
    "model_id",
    "quantization",
    "model_sha256",
    "engine",
    "harness",
    "context_length",
    "kv_cache_type",
    "draft_model",
    "launch_settings",
)


@dataclass(frozen=True)
class Models:
    hardware: Any
    hardware_class: Any
    stack: Any
    run: Any
    lane: Any
    upload_attempt: Any
    worker_host: Any

    @classmethod
    def from_apps(cls, apps: Apps) -> Models:
        return cls(
            hardware=apps.get_model("runs", "Hardware"),
            hardware_class=apps.get_model("runs", "HardwareClass"),
            stack=apps.get_model("runs", "Stack"),
            run=apps.get_model("runs", "Run"),
            lane=apps.get_model("runs", "Lane"),
            upload_attempt=apps.get_model("submissions", "UploadAttempt"),
            worker_host=apps.get_model("worker", "WorkerHost"),
        )


def ensure_class(model: Any, fields: Mapping[str, Any]) -> Any:
    """The HardwareClass row with these fields (runs.normalize), created the first time. Two
    keys whose slugs coincide (a long name cut short) keep apart by a suffix of the key."""
    fields = dict(fields)
    key: str = fields.pop("key")
    found = model.objects.filter(key=key).first() or sized_peer(model, fields)
    if found is not None:
        return found
    if model.objects.filter(slug=fields["slug"]).exists():
        suffix = hashlib.sha256(key.encode()).hexdigest()[:6]
        fields["slug"] = f"{fields['slug'][: 120 - 7]}-{suffix}"
    found, _ = model.objects.get_or_create(key=key, defaults=fields)
    return found


SIZED_KINDS = ("apple", "gpu")


def sized_peer(model: Any, fields: Mapping[str, Any]) -> Any | None:
    """For a GPU or Apple class without its memory size (a file that recorded none): the one
    class of the same chip and count with a size, where exactly one exists; else None (the
    class is then its own, labelled "memory not reported" by runs.normalize)."""
    if fields.get("memory_gb") is not None or fields.get("kind") not in SIZED_KINDS:
        return None
    peers = model.objects.filter(
        kind=fields["kind"], chip=fields["chip"], count=fields["count"], memory_gb__isnull=False
    )
    found = list(peers.order_by("id")[:2])
    return found[0] if len(found) == 1 else None


def merge_unsized_classes(models: Any, refresh: Callable[[list[int]], Any]) -> int:
    """Each stored class without its memory size joins the one sized class of its chip and
    count where exactly one exists (its machines and runs move, and `refresh` rebuilds the
    lanes of the stacks they touch), else is relabelled "memory not reported". The number
    of classes merged away. `models` needs hardware_class, hardware, run and lane (the
    migration's historical ones, or runs.lanes.LaneModels with hardware)."""
    merged, touched = 0, set()
    unsized = models.hardware_class.objects.filter(kind__in=SIZED_KINDS, memory_gb__isnull=True)
    for row in unsized.order_by("id"):
        fields = {"kind": row.kind, "chip": row.chip, "count": row.count, "memory_gb": None}
        peer = sized_peer(models.hardware_class, fields)
        if peer is None:
            label = normalize.unsized_label(row.label)[:200]
            models.hardware_class.objects.filter(id=row.id).update(label=label)
            continue
        runs = models.run.objects.filter(hardware_class_id=row.id)
        touched |= set(runs.values_list("stack_id", flat=True).distinct())
        runs.update(hardware_class_id=peer.id)
        models.hardware.objects.filter(hardware_class_id=row.id).update(hardware_class_id=peer.id)
        models.lane.objects.filter(hardware_class_id=row.id).delete()
        models.hardware_class.objects.filter(id=row.id).delete()
        merged += 1
    if touched:
        refresh(sorted(touched))
    return merged


def _merge(
    model: Any,
    rows: list[Row],
    new_key: Callable[[Row], str],
    key_field: str,
    repoint: Callable[[list[int], int], None],
) -> dict[int, Row]:
    """Group rows by their re-derived key; repoint and delete all but one row of each group.
    The survivors by id, each with its new key (not written yet)."""
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        groups[new_key(row)].append(row)
    survivors: dict[int, Row] = {}
    for key, group in groups.items():
        # The row already holding the key stays (its id is in links and URLs), else the oldest.
        group.sort(key=lambda row: (row[key_field] != key, row["id"]))
        keep, *merged = group
        if merged:
            losers = [row["id"] for row in merged]
            repoint(losers, keep["id"])
            model.objects.filter(id__in=losers).delete()
        survivors[keep["id"]] = {**keep, "new_key": key}
    return survivors


def _rekey(model: Any, survivors: dict[int, Row], key_field: str) -> None:
    """Give survivors their new keys; through a placeholder first, since one survivor's new key
    may be another's old one."""
    moving = [row for row in survivors.values() if row[key_field] != row["new_key"]]
    for row in moving:
        model.objects.filter(id=row["id"]).update(**{key_field: f"~rekey:{row['id']}"})
    for row in moving:
        model.objects.filter(id=row["id"]).update(**{key_field: row["new_key"]})


def _machine_identity(row: Row) -> normalize.HardwareIdentity:
    return normalize.hardware_identity(
        cpu=row["cpu_model"],
        gpu=row["gpu_model"],
        gpu_count=row["gpu_count"],
        vram_gb=row["vram_gb"],
        ram_gb=row["ram_gb"],
        os_name=row["os"],
        memory_channels=row["memory_channels"],
        vendor=row["gpu_vendor"],
    )


def rederive_hardware(models: Models) -> int:
    """Every machine re-derived (a CPU's name stored as a GPU becomes a CPU-only machine), the
    machines whose keys now coincide merged, and each in its hardware class. The number of
    machines left."""
    rows = list(
        models.hardware.objects.order_by("id").values("id", "canonical_key", *HARDWARE_FIELDS)
    )
    identities = {row["id"]: _machine_identity(row) for row in rows}

    def repoint(losers: list[int], keep: int) -> None:
        models.run.objects.filter(hardware_id__in=losers).update(hardware_id=keep)
        models.worker_host.objects.filter(hardware_id__in=losers).update(hardware_id=keep)

    survivors = _merge(
        models.hardware,
        rows,
        lambda row: identities[row["id"]]["canonical_key"],
        "canonical_key",
        repoint,
    )
    _rekey(models.hardware, survivors, "canonical_key")
    classes: dict[str, int] = {}
    changed = []
    for machine in models.hardware.objects.filter(id__in=list(survivors)).order_by("id"):
        identity = identities[machine.id]
        fields = normalize.hardware_class_of(identity)
        if fields["key"] not in classes:
            classes[fields["key"]] = ensure_class(models.hardware_class, fields).id
        stored: Mapping[str, object] = identity  # read by the names the columns have
        for name in HARDWARE_FIELDS:
            setattr(machine, name, stored[name])
        machine.hardware_class_id = classes[fields["key"]]
        changed.append(machine)
    models.hardware.objects.bulk_update(
        changed, [*HARDWARE_FIELDS, "hardware_class"], batch_size=ROW_BATCH
    )
    return len(changed)


def _stack_fields(row: Row) -> Row:
    # "method" joined the identity later (runs 0010): earlier migrations' models lack it.
    return {name: row[name] for name in (*STACK_FIELDS, "method") if name in row}


def rederive_stacks(models: Models, only: Q | None = None) -> int:
    """Every stack's comparability key re-derived from its stored fields; stacks whose keys now
    coincide merged (their runs and attempts move to one of them). The number merged away.

    `only` limits it to some stacks (a rename of one field's values: the renamed stacks and
    the ones they may now coincide with)."""
    chosen = models.stack.objects.filter(only) if only is not None else models.stack.objects
    names = [f.name for f in models.stack._meta.get_fields()]
    extra = ["method"] if "method" in names else []
    rows = list(chosen.order_by("id").values("id", "comparability_key", *STACK_FIELDS, *extra))

    def repoint(losers: list[int], keep: int) -> None:
        models.run.objects.filter(stack_id__in=losers).update(stack_id=keep)
        models.upload_attempt.objects.filter(stack_id__in=losers).update(stack_id=keep)
        models.lane.objects.filter(stack_id__in=losers).delete()  # rebuilt from the runs
        # Its counts are stale until the next refresh: first in line for it.
        models.stack.objects.filter(id=keep).update(stats_refreshed_at=None)

    survivors = _merge(
        models.stack,
        rows,
        lambda row: normalize.stack_identity(**_stack_fields(row)),
        "comparability_key",
        repoint,
    )
    _rekey(models.stack, survivors, "comparability_key")
    for row in survivors.values():
        digest = normalize.normalise_digest(row["model_sha256"])
        settings = normalize.normalise_launch_settings(row["launch_settings"])
        if digest != row["model_sha256"] or settings != row["launch_settings"]:
            models.stack.objects.filter(id=row["id"]).update(
                model_sha256=digest, launch_settings=settings
            )
    return len(rows) - len(survivors)


def _id_ranges(queryset: Any) -> list[tuple[int, int]]:
    ids = queryset.order_by("id").values_list("id", flat=True)
    first, last = ids.first(), queryset.order_by("-id").values_list("id", flat=True).first()
    if first is None:
        return []
    return [(start, start + RUN_BATCH) for start in range(first, last + 1, RUN_BATCH)]


def assign_run_classes(models: Models) -> None:
    """Each run in its machine's class; runs without a machine in the remote endpoint's class
    (by provider) when scored remotely, else in the unknown-hardware class."""
    runs = models.run.objects
    machine_class = Subquery(
        models.hardware.objects.filter(id=OuterRef("hardware_id")).values("hardware_class_id")[:1]
    )
    for start, end in _id_ranges(runs.all()):
        runs.filter(id__gte=start, id__lt=end, hardware__isnull=False).update(
            hardware_class_id=machine_class
        )
    machineless = runs.filter(hardware__isnull=True)
    combos = machineless.order_by().values_list("scoring_mode", "provider").distinct()
    for mode, provider in list(combos):
        fields = normalize.remote_class(provider) if mode == "remote" else normalize.unknown_class()
        class_id = ensure_class(models.hardware_class, fields).id
        chosen = machineless.filter(scoring_mode=mode, provider=provider)
        for start, end in _id_ranges(chosen):
            chosen.filter(id__gte=start, id__lt=end).update(hardware_class_id=class_id)


def rederive_all(apps: Apps) -> None:
    """What the data migration does: machines, stacks, run classes, then every lane."""
    from runs.lanes import LaneModels, refresh_lanes

    models = Models.from_apps(apps)
    rederive_hardware(models)
    rederive_stacks(models)
    assign_run_classes(models)
    refresh_lanes(
        models.stack.objects.values_list("id", flat=True),
        models=LaneModels(run=models.run, lane=models.lane, hardware_class=models.hardware_class),
    )
