"""The community sources in shared/data/real, read into speed-only runs with their provenance:
LocalMaxxing's leaderboard as llmfit embeds it, llmfit's community submissions and
club-5060ti's results JSON and CSV (runs.methods names each source's method).

Every record is attributed to its source, never to a person, carries what it came from
(repository, commit, path, row id, licence, repeats) and keeps nothing private in a public
field. `mapping_report` says, per source, what became of every row.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from runs import normalize
from runs.importers import club5060ti, llmfit, localmaxxing
from runs.importers.community_shared import Parsed, SourceReport
from runs.importers.records import FormatError, JsonObject, RunRecord, load_json

KINDS = ("localmaxxing", "llmfit", "club-5060ti-json", "club-5060ti-csv")
METHOD_OF = {
    "localmaxxing": "localmaxxing",
    "llmfit": "llmfit",
    "club-5060ti-json": "club-5060ti",
    "club-5060ti-csv": "club-5060ti",
}
# Files beside the data that are not results.
_NOT_RESULTS = ("readme.md", "license", "schema.json")


def detect_community(path: Path, document: object | None) -> str | None:
    """Which community source a file is from (KINDS), or None. `document` is the parsed JSON;
    None for a table, whose header is read from `path`."""
    if document is None:
        if path.suffix.lower() != ".csv":
            return None
        try:
            with path.open(encoding="utf-8", errors="replace") as handle:
                first = handle.readline()
        except OSError:
            return None
        return "club-5060ti-csv" if club5060ti.detect_csv_header(first) else None
    if localmaxxing.detect(document):
        return "localmaxxing"
    if llmfit.detect(document):
        return "llmfit"
    if club5060ti.detect_json(document):
        return "club-5060ti-json"
    return None


def parse_community(path: Path, text: str, document: object | None) -> list[RunRecord]:
    """The file's records; FormatError naming the row and field of what is malformed."""
    return _parse(path, text, document).records


def _parse(path: Path, text: str, document: object | None) -> Parsed:
    kind = _kind(path, text, document)
    if kind == "localmaxxing":
        return localmaxxing.parse(document)
    if kind == "llmfit":
        return llmfit.parse(path, document)
    if kind == "club-5060ti-json":
        return club5060ti.parse_json(path, document)
    if kind == "club-5060ti-csv":
        return club5060ti.parse_csv(path, text)
    raise FormatError("", "not a file from a community source this importer knows")


def _kind(path: Path, text: str, document: object | None) -> str | None:
    if document is None:
        first = text.split("\n", 1)[0]
        return "club-5060ti-csv" if club5060ti.detect_csv_header(first) else None
    return detect_community(path, document)


def mapping_report(path_or_dir: Path) -> dict[str, JsonObject]:
    """Per source (method): files, rows, distinct rows, records, duplicates merged, and the
    rows left out, unmapped (hardware or model name not mapped) or holding no speed figure,
    each with its reason; with the hardware classes the records fall in.

    A result two files of one source share (llmfit re-shares) is counted once."""
    reports: dict[str, SourceReport] = {}
    records: dict[str, dict[str, RunRecord]] = {}
    for path in _files(Path(path_or_dir)):
        text = path.read_text(encoding="utf-8")
        document = None if path.suffix.lower() == ".csv" else _json(path, text)
        kind = detect_community(path, document)
        if kind is None:
            continue
        parsed = _parse(path, text, document)
        method = METHOD_OF[kind]
        reports.setdefault(method, SourceReport(method)).add(parsed.report)
        for record in parsed.records:
            records.setdefault(method, {})[record.client_run_id] = record
    out: dict[str, JsonObject] = {}
    for method, report in reports.items():
        kept = records.get(method, {})
        report.records = len(kept)
        report.duplicates_merged = sum(r.provenance.get("repeats", 1) - 1 for r in kept.values())
        report.unmapped = list({row["row_id"]: row for row in report.unmapped}.values())
        report.no_figure = list({row["row_id"]: row for row in report.no_figure}.values())
        summary = report.as_dict()
        summary["hardware_classes"] = dict(
            Counter(hardware_class_label(r) for r in kept.values()).most_common()
        )
        # Mapped, but with less than a plausibility check needs: no parameter count from the
        # source or the name ("qwen3.5", "muse-glimmer"), or no quantization.
        summary["params_unknown"] = sum(not _params_b(r) for r in kept.values())
        summary["quantization_unknown"] = sum(not r.quantization for r in kept.values())
        out[method] = summary
    return out


def hardware_class_label(record: RunRecord) -> str:
    """The label of the hardware class a record's machine falls in (as the site files it)."""
    hw = record.hardware
    if hw is None:
        return normalize.unknown_class()["label"]
    return normalize.hardware_class(
        cpu=hw.cpu,
        gpu=hw.gpu,
        gpu_count=hw.gpu_count,
        vram_gb=hw.vram_gb,
        ram_gb=hw.ram_gb,
        os_name=hw.os_name,
        memory_channels=hw.memory_channels,
    )["label"]


def _params_b(record: RunRecord) -> float | None:
    params: float | None = record.launch_settings.get("params_b")
    return params or normalize.parse_model(record.model_id)["params_b"]


def _files(base: Path) -> list[Path]:
    if base.is_file():
        return [base]
    return sorted(
        path
        for path in base.rglob("*")
        if path.is_file()
        and path.suffix.lower() in (".json", ".csv")
        and path.name.lower() not in _NOT_RESULTS
        and not path.name.lower().endswith(".schema.json")
    )


def _json(path: Path, text: str) -> object:
    try:
        return load_json(text, position=f"{path.name} line {{line}} column {{column}}")
    except FormatError:
        return None  # not JSON: not a community file


__all__ = [
    "KINDS",
    "detect_community",
    "hardware_class_label",
    "mapping_report",
    "parse_community",
]
