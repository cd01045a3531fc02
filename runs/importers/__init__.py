"""Read any historical BenchLoop data file into format-neutral run records."""

from __future__ import annotations

from pathlib import Path

from runs.importers.community import detect_community, parse_community
from runs.importers.exports import (
    parse_leaderboard_v1,
    parse_leaderboard_v2,
    parse_speed_jsonl,
)
from runs.importers.external import detect_external, parse_external
from runs.importers.records import (
    FormatError,
    HardwareRecord,
    JsonObject,
    JsonText,
    Node,
    RunRecord,
    load_json,
    settle_scale,
)
from runs.importers.runjson import check_not_empty, parse_run
from runs.importers.upgrade import UnsupportedVersion, UpgradedRun, upgrade
from runs.names import is_anonymous
from worker.rules.harnesses import canonical
from worker.rules.redact import redact_field

MAX_FILE_BYTES = 50 * 1024 * 1024

__all__ = [
    "FormatError",
    "RunRecord",
    "UnsupportedVersion",
    "parse_document",
    "parse_path",
    "parse_run_payload",
    "read_file",
]


def parse_path(path: Path, *, model_id: str = "") -> list[RunRecord]:
    return _parse_file(path, model_id)[0]


# Files a folder walk reads: our JSON and JSONL, and the tables other tools write.
DATA_SUFFIXES = (".json", ".jsonl", ".csv", ".md", ".sql", ".txt")
# Beside the data in the sources' folders, and never results: passed over in a folder walk.
NOT_RESULTS = ("readme.md", "license", "license.md", "schema.json")


def is_results_file(path: Path) -> bool:
    """Whether a folder walk should read this file (a file named on its own is always read)."""
    name = path.name.lower()
    return (
        path.suffix.lower() in DATA_SUFFIXES
        and name not in NOT_RESULTS
        and not name.endswith(".schema.json")
    )


def _parse_file(
    path: Path, model_id: str, hardware: HardwareRecord | None = None
) -> tuple[list[RunRecord], str, object]:
    """(records, the file's text, its parsed JSON document or None for other text)."""
    if path.stat().st_size > MAX_FILE_BYTES:
        raise FormatError("", f"file is larger than {MAX_FILE_BYTES // 2**20} MiB")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"byte {exc.start}", "not UTF-8 text") from None
    if path.suffix == ".jsonl" and not detect_external(text, path.name):
        return [public_fields(r) for r in parse_speed_jsonl(text, model_id=model_id)], text, None
    if path.suffix != ".json":
        return _parse_text(path, text, hardware), text, None
    document = load_json(text, position="line {line} column {column}")
    if detect_community(path, document):
        return [public_fields(r) for r in parse_community(path, text, document)], text, document
    if detect_external(text, path.name):
        return _parse_text(path, text, hardware), text, document
    return parse_document(document), text, document


def _parse_text(path: Path, text: str, hardware: HardwareRecord | None) -> list[RunRecord]:
    """A table or listing another tool wrote: llama-bench's or llama-benchy's, or a
    community source's CSV; `hardware` stands in where the file names none."""
    if detect_community(path, None):
        return [public_fields(r) for r in parse_community(path, text, None)]
    if not detect_external(text, path.name):
        raise FormatError(
            "", "not a format BenchLoop reads (llama-bench, llama-benchy, a BenchLoop file)"
        )
    source = "override" if hardware is not None else "submitter"
    records = parse_external(text, filename=path.name, hardware=hardware, hardware_source=source)
    return [public_fields(r) for r in records]


def read_file(
    path: Path, model_id: str = "", hardware: HardwareRecord | None = None
) -> tuple[list[RunRecord], str]:
    """(records, "") or ([], why the file is rejected), for parser processes: payloads and
    task metadata come back as JsonText. `hardware` is for files that name none."""
    try:
        records, text, document = _parse_file(path, model_id, hardware)
    except FormatError as exc:
        return [], str(exc)
    except OSError as exc:
        return [], f"cannot read ({exc.strerror})"
    for record in records:
        # A run file's payload is the whole file: its text needs no second serialisation.
        whole = record.raw_payload is document
        record.raw_payload = JsonText(text) if whole else JsonText.of(record.raw_payload)
        for suite in record.suites:
            for task in suite.tasks:
                task.metadata = JsonText.of(task.metadata)
    return records, ""


def detect_format(data: object) -> str:
    node = Node(data)
    if not isinstance(data, dict):
        raise node.fail("expected a JSON object at the top level")
    if str(data.get("schemaVersion", "")).startswith("benchloop.submission."):
        raise node.get("schemaVersion").fail(
            "benchloop.submission.v1 was a draft contract that no client ever sent; not importable"
        )
    if "entries" in data and data.get("version") == "v1":
        return "leaderboard-v1"
    if "runs" in data and "generated_at" in data:
        return "leaderboard-v2"
    return "run"


def parse_run_payload(data: JsonObject, *, upgraded: UpgradedRun | None = None) -> RunRecord:
    """Any run-shaped payload, through the upgrader chain (unless `upgraded` already holds
    what upgrade(data) returns), into one record."""
    if upgraded is None:
        upgraded = upgrade(data)
    kind = upgraded.original_format
    node = Node(upgraded.bundle, "run" if kind == "envelope-v3" else "")
    record = parse_run(node, kind)
    record.visibility = upgraded.visibility
    record.raw_payload = data
    check_not_empty(record, node)
    return public_fields(record)


# Fields every visitor sees (pages, exports, share images, the read API, URLs). The launch
# command, errors, outputs and task metadata stay as sent: only their owner sees them raw,
# and every public surface redacts them where it shows them.
_PUBLIC_RUN_FIELDS = (
    "model_id",
    "quantization",
    "model_sha256",
    "engine",
    "engine_version",
    "provider",
    "harness",
    "harness_version",
    "kv_cache_type",
    "draft_model",
    "benchmark_id",
    "benchmark_version",
    "profile",
    "requested_profile",
    "manifest_hash",
    "submitter_name",
)


def public_fields(record: RunRecord) -> RunRecord:
    """The record with its public fields scrubbed of addresses, keys and personal paths, and
    its score scale settled (records.settle_scale): every importer's records pass here."""
    settle_scale(record)
    # The earlier product's (and an older CLI's) format names are today's (issue 19).
    record.harness = canonical(record.harness or "raw")
    for name in _PUBLIC_RUN_FIELDS:
        setattr(record, name, redact_field(getattr(record, name)))
    if is_anonymous(record.submitter_name):
        record.submitter_name = ""  # "anonymous" is nobody: it gets no page of its own
    if record.hardware is not None:
        for name in ("cpu", "gpu", "os_name"):
            setattr(record.hardware, name, redact_field(getattr(record.hardware, name)))
    for suite in record.suites:
        for task in suite.tasks:
            task.task_id = redact_field(task.task_id)
            task.finish_reason = redact_field(task.finish_reason)
    record.noncomparable_reasons = [redact_field(r) for r in record.noncomparable_reasons]
    return record


def parse_document(data: object) -> list[RunRecord]:
    """Detect the format of one parsed JSON document and read every run in it."""
    kind = detect_format(data)
    node = Node(data)
    if kind == "leaderboard-v1":
        return [public_fields(record) for record in parse_leaderboard_v1(node)]
    if kind == "leaderboard-v2":
        return [public_fields(record) for record in parse_leaderboard_v2(node)]
    return [parse_run_payload(node.obj())]
