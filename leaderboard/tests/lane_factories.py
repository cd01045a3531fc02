"""Hardware classes and lanes for the detail-page tests (stack, compare, model, run, images).

Runs are imported through the real service (submissions.intake.import_records), then put on a
hardware class; refresh_lanes rebuilds the stored Lane rows with runs.services, as moderation
does.
Kept apart from factories.py, where the board's tests build their own.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.utils.text import slugify

from leaderboard.tests.factories import record
from runs.models import HardwareClass, Run
from runs.services import refresh_stack_stats
from submissions.intake import import_records
from submissions.models import Status, Submission

# slug: (label, kind, chip, count, memory GB, GPU name in the run record)
CLASSES = {
    "rtx-4090": ("RTX 4090 24 GB", "gpu", "RTX 4090", 1, 24, "NVIDIA GeForce RTX 4090"),
    "2x-rtx-3090": ("2× RTX 3090 48 GB", "gpu", "RTX 3090", 2, 48, "NVIDIA GeForce RTX 3090"),
    "h100": ("H100 80 GB", "gpu", "H100", 1, 80, "NVIDIA H100 80GB HBM3"),
    "m3-max-64": ("Apple M3 Max 64 GB", "apple", "M3 Max", 1, 64, "Apple M3 Max"),
    "cpu-epyc": ("CPU only: AMD EPYC 9454", "cpu", "AMD EPYC 9454", 1, 256, ""),
}


def hw_class(slug: str) -> HardwareClass:
    label, kind, chip, count, memory, _gpu = CLASSES.get(
        slug, (slug.upper(), "gpu", slug, 1, 24, slug)
    )
    found, _ = HardwareClass.objects.get_or_create(
        slug=slug,
        defaults={
            "key": f"test:{slug}",
            "kind": kind,
            "label": label,
            "chip": chip,
            "vendor": {"gpu": "nvidia", "apple": "apple"}.get(kind, ""),
            "count": count,
            "memory_gb": memory,
        },
    )
    return found


def class_record(slug: str, **fields):
    """A run record on the machine of a class (the GPU it names, or a CPU-only box)."""
    _label, _kind, _chip, count, memory, gpu = CLASSES.get(slug, ("", "", "", 1, 24, slug))
    fields.setdefault("gpu", gpu)
    if gpu and _kind == "gpu":
        fields.setdefault("vram_gb", memory / count)
    if not gpu:
        fields.setdefault("vram_gb", None)
        fields.setdefault("cpu", "AMD EPYC 9454 48-Core Processor")
    made = record(**fields)
    if made.hardware is not None:
        made.hardware.gpu_count = count if gpu else 0
    return made


def on_class(slug: str, *records, status: str = Status.APPROVED) -> list[Run]:
    """Import the records, put their runs (and machines) on the class, refresh the lanes.

    The lanes are built once, after the runs are on their class: refreshing them on import
    too (add_runs rebuilds every stack's) only made rows that were then thrown away."""
    runs = import_records(list(records), refresh_stats=False).created
    found = hw_class(slug)
    ids = [run.id for run in runs]
    Run.objects.filter(id__in=ids).update(hardware_class=found)
    for run in runs:
        if run.hardware_id:
            type(run.hardware).objects.filter(id=run.hardware_id).update(hardware_class=found)
        run.hardware_class = found
    if status != Status.APPROVED:
        Submission.objects.filter(run_id__in=ids).update(status=status)
        Run.objects.filter(id__in=ids).update(published=False)
    refresh_lanes({run.stack_id for run in runs})
    return runs


def refresh_lanes(stack_ids: Iterable[int]) -> None:
    """The stored Lane rows of these stacks, rebuilt from their runs by the real service."""
    refresh_stack_stats(stack_ids=sorted(set(stack_ids)))


def speed_record(slug: str, *, decode: float, prefill: float, ttft: float, **fields):
    """A run on a class with its own decode, prefill and TTFT (each spread ±2 by its trials)."""
    made = class_record(slug, decode=decode, **fields)
    for metric, value in (("decode_tps", decode), ("prefill_tps", prefill), ("ttft_ms", ttft)):
        made.speed.update(
            {
                f"{metric}_median": value,
                f"{metric}_mean": value + 0.5,
                f"{metric}_stdev": 1.0,
                f"{metric}_p5": value - 2,
                f"{metric}_p95": value + 2,
                f"{metric}_peak": value - 2 if metric == "ttft_ms" else value + 2,
            }
        )
    return made


def classify_machines() -> None:
    """Give every machine and run without a hardware class one (GPU model × count × VRAM,
    Apple chip × memory, or CPU), and refresh every stack's lanes. A stand-in for the
    identity work of issue 15, which derives classes on import: then this finds nothing."""
    from runs.models import Hardware

    unclassified = Hardware.objects.filter(hardware_class__isnull=True)
    if not unclassified.exists():
        return
    for machine in unclassified:
        if machine.gpu_model:
            key = f"{machine.gpu_vendor}:{machine.gpu_model}:{machine.gpu_count}:{machine.vram_gb}"
            kind = "apple" if machine.gpu_vendor == "apple" else "gpu"
        else:
            key, kind = f"cpu:{machine.cpu_model}", "cpu"
        slug = slugify(key)[:120] or "unknown"
        found, _ = HardwareClass.objects.get_or_create(
            key=f"test:{key}"[:255],
            defaults={"slug": slug, "kind": kind, "label": machine.label[:200]},
        )
        Hardware.objects.filter(id=machine.id).update(hardware_class=found)
        Run.objects.filter(hardware_id=machine.id).update(hardware_class=found)
    refresh_lanes(Run.objects.values_list("stack_id", flat=True).distinct())
