"""A results file another tool wrote (llama-bench, llama-benchy), uploaded as it is: parse,
check and store each of its runs, all of them or none.

Each run goes through what a bundle upload goes through (services.submit_record: the storable
checks, the plausibility checks, the moderation status, the repeat lookups); only the parsing
differs (runs.importers.external).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.contrib.auth.models import User
from django.db import transaction

from runs import normalize
from runs.importers import public_fields
from runs.importers.external import parse_external
from runs.importers.hardware_text import parse_hardware_text
from runs.importers.records import (
    FormatError,
    HardwareRecord,
    Node,
    RunRecord,
    as_json_value,
)
from submissions.models import ApiKey, Channel
from submissions.services import UploadOutcome, submit_record

HARDWARE_SOURCES = ("submitter", "override")
MAX_FILENAME = 255
MAX_HARDWARE_TEXT = 200


@dataclass
class ExternalUpload:
    """What became of each run of the file, in the file's order."""

    records: list[RunRecord]
    outcomes: list[UploadOutcome]

    @property
    def created(self) -> bool:
        return any(outcome.created for outcome in self.outcomes)


def read_hardware(node: Node) -> HardwareRecord | None:
    """The machine the submitter names for a file that names none: an object of detected
    fields ({cpu, gpu, gpu_count, vram_gb, ram_gb, os}, as `benchloop submit --from` sends
    this machine's), or words ("RTX 4090 24 GB", as `--hardware` takes them); FormatError
    naming the field otherwise."""
    if node.value is None:
        return None
    if isinstance(node.value, str):
        try:
            return parse_hardware_text(node.str(max_length=MAX_HARDWARE_TEXT))
        except FormatError as exc:
            raise node.fail(exc.message) from None
    node.obj()
    hardware = HardwareRecord(
        cpu=node.get("cpu", required=False).str(max_length=MAX_HARDWARE_TEXT),
        gpu=node.get("gpu", required=False).str(max_length=MAX_HARDWARE_TEXT),
        gpu_count=node.get("gpu_count", required=False).int() or 0,
        vram_gb=node.get("vram_gb", required=False).num(minimum=0, maximum=100_000) or None,
        ram_gb=node.get("ram_gb", required=False).num(minimum=0, maximum=100_000) or None,
        os_name=node.get("os", required=False).str(max_length=60),
    )
    if hardware.gpu_count > 64:
        raise node.get("gpu_count").fail("must be ≤ 64")
    if not (hardware.cpu or hardware.gpu):
        raise node.fail("names no CPU and no GPU")
    if hardware.gpu and not hardware.gpu_count:
        hardware.gpu_count = 1
    return hardware


def parse_upload(
    content: str,
    *,
    filename: str,
    hardware: HardwareRecord | None,
    hardware_source: str = "submitter",
) -> list[RunRecord]:
    """The file's runs, with their public fields redacted. Raises NeedsHardware when the file
    names no machine and none was given, FormatError (with its position) for a bad file."""
    records = parse_external(
        content, filename=filename, hardware=hardware, hardware_source=hardware_source
    )
    if not records:
        raise FormatError("", "the file holds no results")
    return [public_fields(record) for record in records]


def submit_external(
    records: list[RunRecord], *, submitter: User, api_key: ApiKey | None
) -> ExternalUpload:
    """Store every run of one file in one transaction: an error in any (a value no column
    holds, another account's run) stores none. Runs already on the site are repeats."""
    for record in records:
        # Where the machine came from stays with the run (its page and a repeat's answer).
        record.provenance.setdefault("hardware_source", record.hardware_source)
    with transaction.atomic():
        outcomes = [
            submit_record(
                record,
                digest=record_digest(record),
                channel=Channel.API_KEY,
                submitter=submitter,
                api_key=api_key,
            )
            for record in records
        ]
    return ExternalUpload(records=records, outcomes=outcomes)


def record_digest(record: RunRecord) -> str:
    """What identifies one measurement of the file, whichever machine sends it: the rows as the
    tool wrote them and the figures read from them. The hardware a submitter adds is left out,
    so sending the same file again (with or without --hardware) is a repeat, not a second run;
    so is the start time, which a file without timestamps takes from the moment it is read."""
    return normalize.canonical_hash(
        {
            "method": record.method,
            "format": record.source_format,
            "model": record.model_id,
            "row": as_json_value(record.raw_payload),
            "cells": [
                [suite.suite, task.task_id, [asdict(sample) for sample in task.samples]]
                for suite in record.suites
                for task in suite.tasks
            ],
        }
    )
