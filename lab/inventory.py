"""What a lab host's approval vouches for: the machine an admin approved it as. A lab run is
verified only when it was measured on that machine; a run that names another is stored
self-reported, and the difference goes to the moderators (lab.services.finish_job)."""

from __future__ import annotations

from typing import Literal, get_args

from lab.models import HARDWARE_MISMATCH, WorkerHost
from runs import limits, normalize
from runs.importers.records import RunRecord
from runs.models import Hardware
from runs.services import machine_identity
from worker.rules.hardware import gpu_summary

# What a run says of its machine that the approval covers. Memory channels are left out: the
# agent's registration does not detect them, while a bundle may carry them.
Claimed = Literal["gpu_model", "gpu_count", "vram_gb", "cpu_model", "ram_gb", "os"]
CLAIMED: tuple[Claimed, ...] = get_args(Claimed)


def machine_of(hardware_info: dict) -> Hardware:
    """The machine a host's registration describes (the agent's hardware detection), counted
    as a bundle counts it: every card's name and all their memory together."""
    found = hardware_info.get("gpus")
    # The agent's own words, read as far as they make sense: an ill-typed value is unknown.
    gpus = [
        {"name": _text(g.get("name")), "vram_gb": _size(g.get("vram_gb"))}
        for g in (found if isinstance(found, list) else [])
        if isinstance(g, dict)
    ]
    names, vram = gpu_summary({"gpus": gpus})
    return Hardware.for_identity(
        cpu=_text(hardware_info.get("cpu_model"))[: limits.max_length(Hardware, "cpu_model")],
        gpu=names[: limits.max_length(Hardware, "gpu_model")],
        gpu_count=len(gpus),
        vram_gb=vram or None,
        ram_gb=_size(hardware_info.get("ram_gb")),
        os_name=_text(hardware_info.get("os")),
    )


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _size(value: object) -> float | None:
    """A memory size in GB, or None when it is not one (text, a bool, NaN, absurdly large)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value <= 100_000 else None


def hardware_mismatch(host: WorkerHost, record: RunRecord) -> str:
    """Why the record's machine is not the one `host` was approved as, or "" when it is. A run
    that names no machine (a remote endpoint's) claims no hardware, so nothing differs."""
    claimed = machine_identity(record)
    if claimed is None:
        return ""
    approved = host.hardware
    if approved is None:
        return (
            f"{HARDWARE_MISMATCH}: the run names {_label(claimed)}, and {host.name} was "
            "approved with no hardware on record. Stored self-reported."
        )
    differs = [
        f"{name} {claimed[name]!r} (approved: {getattr(approved, name)!r})"
        for name in CLAIMED
        if claimed[name] != getattr(approved, name)
    ]
    if not differs:
        return ""
    return (
        f"{HARDWARE_MISMATCH}: {host.name} was approved as {approved.label}; the run names "
        f"{_label(claimed)}: {'; '.join(differs)}. Stored self-reported."
    )


def _label(identity: normalize.HardwareIdentity) -> str:
    return normalize.hardware_class_of(identity)["label"]
