"""A moderator adds a machine to the accelerator data, and the runs waiting on it are rechecked."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from runs import roofline
from runs.accelerators import DataFileError, name_key, parse_entry
from runs.models import Hardware
from submissions import integrity
from submissions.access import is_moderator
from submissions.models import AcceleratorOverride, Status, Submission


def add_accelerator(*, moderator: User, entry: dict) -> tuple[AcceleratorOverride, int]:
    """Store a validated entry (name, kind, bandwidth_gbps, source; memory_gb, fp16_tflops,
    int8_tops optional) and recheck the waiting runs it gives a ceiling to. Returns the row
    and how many runs were rechecked. Moderators only, whoever calls."""
    if not is_moderator(moderator):
        raise PermissionDenied("Only moderators can add hardware.")
    try:
        parse_entry(entry)
    except DataFileError as exc:
        raise ValidationError(str(exc)) from None
    key = name_key(entry["name"])
    kinds = roofline.GPU_KINDS if entry["kind"] != "cpu" else roofline.CPU_KINDS
    known = integrity.current_catalog().find(entry["name"], kinds=kinds)
    # A family's "fastest member" stands in for an unnamed model; a named one may replace it.
    if known is not None and known.family != known.name:
        raise ValidationError(f"{entry['name']} is already known as {known.name}.")
    fields = {name: entry.get(name) for name in ("memory_gb", "fp16_tflops", "int8_tops")}
    try:
        with transaction.atomic():
            row = AcceleratorOverride.objects.create(
                name=entry["name"].strip(),
                name_key=key,
                kind=entry["kind"],
                bandwidth_gbps=entry["bandwidth_gbps"],
                source=entry["source"].strip(),
                added_by=moderator,
                **fields,
            )
    except IntegrityError:
        raise ValidationError(f"{entry['name']} was just added by another moderator.") from None
    return row, recheck_waiting()


def recheck_waiting() -> int:
    """Give a ceiling to waiting runs flagged "no ceiling known" where one now exists: the
    flag becomes the arithmetic (over the ceiling) or a note that the claim is within it. The
    status stays as it is: a moderator still decides."""
    catalog = integrity.current_catalog()
    flagged = Submission.objects.filter(status=Status.FLAGGED, run__hardware__isnull=False)
    changed = 0
    for submission in flagged.select_related("run__stack", "run__hardware"):
        if not any(r.startswith(integrity.NO_CEILING) for r in submission.flag_reasons):
            continue
        run = submission.run
        found = integrity.ceilings_for(run.stack, run.hardware, catalog)
        if isinstance(found, roofline.Unknown):
            continue
        claim = integrity.Claim.of_run(run)
        fresh = integrity.physics(claim, stack=run.stack, hardware=run.hardware, catalog=catalog)
        kept = [r for r in submission.flag_reasons if not r.startswith(integrity.NO_CEILING)]
        submission.flag_reasons = kept + (fresh or [integrity.within_ceiling_note(claim, found)])
        submission.save(update_fields=["flag_reasons"])
        changed += 1
    return changed


def hardware_name(hardware: Hardware) -> tuple[str, str]:
    """The name and kind a moderator would add for this machine."""
    if hardware.gpu_model:
        return hardware.gpu_model, "apple" if hardware.gpu_vendor == "apple" else "gpu"
    return hardware.cpu_model, "cpu"
