"""llmfit's community submissions (`llmfit bench --share`), schema version 1: one file per
submission under llmfit-core/data/community/<hardware>/, with the machine, the tool's version
and per model file its provider, runs and average / min / max decode speed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from runs import bounds, normalize
from runs.importers.community_shared import (
    LLMFIT_COMMIT,
    LLMFIT_REPOSITORY,
    MODEL_NOT_MAPPED,
    Parsed,
    SourceReport,
    apple_chip,
    apple_hardware,
    cpu_name,
    cpu_names_gpu,
    engine_name,
    gpu_name,
    hardware_problem,
    known,
    merge_repeats,
    model_id_and_quant,
    os_family,
    provenance,
    scrub_tree,
    speed_record,
)
from runs.importers.records import FormatError, HardwareRecord, Node, RunRecord

SOURCE = "llmfit"
FOLDER = "llmfit-core/data/community"
_PROVIDERS = {"llamacpp": "llama.cpp"}


def detect(document: object) -> bool:
    return (
        isinstance(document, dict)
        and document.get("schemaVersion") == 1
        and "submittedAtUnix" in document
        and isinstance(document.get("hardware"), dict)
        and isinstance(document.get("tool"), dict)
        and isinstance(document.get("results"), list)
    )


@dataclass
class _Result:
    folder: str  # the hardware's folder
    file_name: str
    index: int
    submitted: datetime
    tool_version: str
    hardware: Node
    result: Node

    @property
    def file_id(self) -> str:
        stem = self.file_name.removesuffix(".json")
        return f"{self.folder}/{stem}" if self.folder else stem

    @property
    def row_id(self) -> str:
        return f"{self.file_id}#{self.index}"

    @property
    def source_path(self) -> str:
        return "/".join(part for part in (FOLDER, self.folder, self.file_name) if part)


def parse(path: Path, document: object) -> Parsed:
    """The file's results, one record each. A result that another submission of the same
    machine repeats (a re-shared backlog) becomes the same record from either file: the
    earliest copy's, with every copy listed, so importing both stores it once."""
    report = SourceReport(SOURCE, files=1)
    mine = _results(path, Node(document))
    report.rows = len(mine)
    others = [r for sibling in _siblings(path) for r in sibling]
    records = []
    for group in merge_repeats(
        [*mine, *others], key=_measurement, order=lambda r: (r.submitted, r.file_id, r.index)
    ):
        if not any(r.file_id == mine[0].file_id for r in group):
            continue
        ids = [r.row_id for r in group]
        first = group[0]
        try:
            records.append(_record(first, ids))
        except _Unmapped as out:
            for row in group:
                if row.file_id == mine[0].file_id:
                    report.leave_out(row.row_id, str(out))
            continue
        report.duplicates_merged += len(ids) - 1
    report.records = len(records)
    return Parsed(records, report)


class _Unmapped(Exception):
    pass


def _results(path: Path, root: Node) -> list[_Result]:
    if root.get("schemaVersion").int() != 1:
        raise root.get("schemaVersion").fail("only schema version 1 is known")
    stamp = root.get("submittedAtUnix").int(optional=False)
    try:
        submitted = datetime.fromtimestamp(stamp, UTC)
    except (OverflowError, OSError, ValueError):
        raise root.get("submittedAtUnix").fail("is not a Unix time") from None
    problem = bounds.moment_problem(submitted)
    if problem:
        raise root.get("submittedAtUnix").fail(f"timestamp {problem}")
    tool = root.get("tool")
    hardware = root.get("hardware")
    hardware.obj()
    results = root.get("results").list()
    if not results:
        raise root.get("results").fail("holds no results")
    return [
        _Result(path.parent.name, path.name, i, submitted, tool.get("version").str(), hardware, r)
        for i, r in enumerate(results)
    ]


def _siblings(path: Path) -> list[list[_Result]]:
    """The other submissions in the file's hardware folder, where they can be read: a result
    shared twice is one measurement. One that cannot be read is left to its own import."""
    found = []
    try:
        names = sorted(p for p in path.parent.glob("*.json") if p.name != path.name)
    except OSError:
        return []
    for sibling in names:
        try:
            document = json.loads(sibling.read_text(encoding="utf-8"))
            if detect(document):
                found.append(_results(sibling, Node(document)))
        except (OSError, ValueError):  # FormatError is a ValueError
            continue
    return found


def _measurement(row: _Result) -> str:
    return normalize.canonical_hash([row.hardware.value, row.result.value])


def _record(row: _Result, ids: list[str]) -> RunRecord:
    result = row.result
    provider = result.get("provider").str()
    engine = _PROVIDERS.get(provider.lower()) or engine_name(provider)
    raw_model = result.get("model").str()
    model_id, quant = model_id_and_quant(raw_model, engine=engine)
    if not model_id:
        raise _Unmapped(f"{MODEL_NOT_MAPPED}: empty model name")
    hardware = _hardware(row.hardware)
    problem = hardware_problem(hardware)
    if problem:
        raise _Unmapped(problem)
    runs = result.get("numRuns").int(optional=False, minimum=1)
    average = result.get("avgTps").num(optional=False, minimum=0, maximum=100_000)
    low = result.get("minTps").num(optional=False, minimum=0, maximum=100_000)
    high = result.get("maxTps").num(optional=False, minimum=0, maximum=100_000)
    if not low <= average <= high:
        raise result.get("avgTps").fail(f"{average:g} is outside min {low:g} – max {high:g}")
    raw = scrub_tree(
        {
            "submittedAtUnix": int(row.submitted.timestamp()),
            "tool": {"name": "llmfit", "version": row.tool_version},
            "hardware": row.hardware.obj(),
            "result": {**result.obj(), "model": model_id},
        }
    )
    return speed_record(
        method=SOURCE,
        row_id=ids[0],
        started_at=row.submitted,
        model_id=model_id,
        quantization=quant,
        engine=engine,
        provider=provider[:40],
        benchmark_version=row.tool_version[:20],
        hardware=hardware,
        # An average over the tool's runs, with the fastest run as its peak; llmfit keeps no
        # samples, so there is no median and no percentile to give.
        speed={
            "decode_tps_mean": average or None,
            "decode_tps_peak": high or None,
            "ttft_ms_mean": result.get("avgTtftMs", required=False).num(minimum=0) or None,
        },
        speed_sample_count=runs,
        total_runtime_sec=(result.get("avgTotalMs").num(minimum=0) or 0) * runs / 1000 or None,
        provenance=provenance(
            source=SOURCE,
            repository=LLMFIT_REPOSITORY,
            commit=LLMFIT_COMMIT,
            path=row.source_path,
            row_ids=ids,
        ),
        raw=raw,
    )


def _hardware(node: Node) -> HardwareRecord:
    """The submitting machine. An integrated GPU (a unified-memory one, or one its CPU names)
    has the system's memory as its own, as an Apple chip does."""
    kind = node.get("hwClass").str()
    name = known(node.get("hardwareName", required=False).str())
    cpu = cpu_name(node.get("cpu").str())
    count = node.get("gpuCount").int(optional=False)
    vram = node.get("vramGb", required=False).num(minimum=0)
    ram = node.get("ramGb").num(minimum=0)
    unified = bool(node.get("unifiedMemory").bool())
    os_name = os_family(node.get("os").str())
    chip = apple_chip(name) if normalize.gpu_vendor(name) == "apple" else ""
    if chip or (kind == "UNIFIED" and cpu.lower().startswith("apple")):
        return apple_hardware(chip or apple_chip(cpu), ram or vram)
    if kind == "CPU_ONLY" or not name or count == 0:
        return HardwareRecord(cpu=cpu, gpu="", gpu_count=0, ram_gb=ram, os_name=os_name)
    gpu = gpu_name(name, cpu=cpu)
    integrated = unified or kind == "UNIFIED" or cpu_names_gpu(cpu, gpu)
    return HardwareRecord(
        cpu=cpu,
        gpu=gpu,
        gpu_count=1 if integrated else count,
        vram_gb=(ram or vram) if integrated else vram,  # llmfit gives all cards' memory
        ram_gb=ram,
        os_name=os_name,
    )


__all__ = ["FormatError", "detect", "parse"]
