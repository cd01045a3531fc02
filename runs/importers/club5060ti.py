"""club-5060ti's hardware-lane board of RTX 5060 Ti machines: its results JSON
(data/results/*.json, schema data/schema/benchmark-result.schema.json) and its summary table
(data/community-results.csv)."""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from runs import bounds, normalize
from runs.importers.community_shared import (
    CLUB_COMMIT,
    CLUB_REPOSITORY,
    MODEL_NOT_MAPPED,
    Parsed,
    SourceReport,
    cpu_name,
    engine_name,
    gpu_name,
    hardware_problem,
    known,
    kv_cache,
    merge_repeats,
    model_id_and_quant,
    number,
    provenance,
    scrub_text,
    scrub_tree,
    speed_record,
)
from runs.importers.records import FormatError, HardwareRecord, Node, RunRecord

SOURCE = "club-5060ti"
CSV_COLUMNS = (
    "date", "contributor", "gpu_count", "gpu_model", "vram_per_gpu_gb", "driver", "motherboard",
    "cpu", "host_ram_gb", "host_ram_speed", "inference_vcpu", "inference_ram_gb", "pcie_link",
    "runtime", "runtime_version", "model", "quant", "context_tokens", "kv_cache", "tp_or_split",
    "mtp_or_spec", "decode_tok_s", "notes",
)  # fmt: skip
_REQUIRED_CSV = ("date", "gpu_count", "gpu_model", "model", "decode_tok_s")
# A result's own fields that are not the measurement: two copies differ only in these.
_NOT_THE_MEASUREMENT = frozenset({"id", "timestamp_utc"})
# "27B", "35B A3B", "122B total / 10B active": total and active parameters.
_PARAMS = re.compile(
    r"(\d+(?:\.\d+)?)\s*B\b(?:.*?\b(\d+(?:\.\d+)?)\s*B\s*active|\s+A(\d+(?:\.\d+)?)B)?", re.I
)
_COUNT_IN = re.compile(r"(\d+)")


class _LeftOut(Exception):
    def __init__(self, reason: str, *, figure: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.figure = reason, figure


# --- results JSON ------------------------------------------------------------------------


def detect_json(document: object) -> bool:
    items = document.get("results") if isinstance(document, dict) else None
    if isinstance(document, dict) and items is None:
        items = [document]  # one result on its own, as the schema describes it
    return (
        isinstance(items, list)
        and bool(items)
        and all(
            isinstance(r, dict) and "schema_version" in r and "promotion_level" in r for r in items
        )
    )


def parse_json(path: Path, document: object) -> Parsed:
    root = Node(document)
    results = root.get("results").list() if "results" in root.obj() else [root]
    report = SourceReport(SOURCE, files=1, rows=len(results))
    records: list[RunRecord] = []
    for group in merge_repeats(
        results,
        key=lambda r: normalize.canonical_hash(
            {k: v for k, v in r.obj().items() if k not in _NOT_THE_MEASUREMENT}
        ),
        order=lambda r: (r.get("timestamp_utc").timestamp(), r.get("id").str()),
    ):
        ids = [r.get("id").str() for r in group]
        _keep(records, report, ids, lambda: _json_record(path, group[0], ids))  # noqa: B023
    report.records = len(records)
    return Parsed(records, report)


def _keep(
    records: list[RunRecord], report: SourceReport, ids: list[str], make: Callable[[], RunRecord]
) -> None:
    """The record of one group of repeated rows, or every id of it left out with the reason."""
    try:
        records.append(make())
    except _LeftOut as out:
        for row_id in ids:
            report.leave_out(row_id, out.reason, figure=out.figure)
        return
    report.duplicates_merged += len(ids) - 1


def _json_record(path: Path, result: Node, ids: list[str]) -> RunRecord:
    if result.get("schema_version").str() != "1.0":
        raise result.get("schema_version").fail("only schema version 1.0 is known")
    if not ids[0].strip():
        raise result.get("id").fail("is empty")
    hardware_node, runtime = result.get("hardware"), result.get("runtime")
    model, serving = result.get("model"), result.get("serving", required=False)
    bench, metrics = result.get("benchmark"), result.get("metrics")
    count = hardware_node.get("gpu_count").int(optional=False, minimum=1)
    per_card = hardware_node.get("vram_per_gpu_gb").num(optional=False, minimum=0)
    cpu = cpu_name(hardware_node.get("cpu", required=False).str())
    hardware = _checked(
        HardwareRecord(
            cpu=cpu,
            gpu=gpu_name(hardware_node.get("gpu_model").str(), cpu=cpu),
            gpu_count=count,
            vram_gb=per_card * count,
            ram_gb=hardware_node.get("host_ram_gb", required=False).num(minimum=0),
        )
    )
    engine = engine_name(runtime.get("engine").str())
    model_id, quant = model_id_and_quant(
        model.get("id").str(), quantization=model.get("quant").str(), engine=engine
    )
    if not model_id:
        raise _LeftOut(f"{MODEL_NOT_MAPPED}: empty model id")
    ttft = metrics.get("ttft_seconds", required=False).num(minimum=0)
    speed = {
        "decode_tps_median": metrics.get("decode_tok_s", required=False).num(minimum=0) or None,
        "prefill_tps_median": metrics.get("prompt_tok_s", required=False).num(minimum=0) or None,
        "ttft_ms_median": ttft * 1000 if ttft else None,
    }
    if not speed["decode_tps_median"] and not speed["prefill_tps_median"]:
        raise _LeftOut("no speed figure (not measured)", figure=True)
    serving_value = serving.value if isinstance(serving.value, dict) else {}
    spec = serving_value.get("speculation") if isinstance(serving_value, dict) else None
    spec = spec if isinstance(spec, dict) else {}
    params, active = _params(model.get("parameter_class", required=False).str())
    moe = model.get("architecture", required=False).str() == "moe"
    settings = {
        "prompt_set": bench.get("prompt_set").str(),
        "batch_size": serving_value.get("batch_size"),
        "ubatch_size": serving_value.get("ubatch_size"),
        "tensor_split": known(serving_value.get("tensor_parallel")) or None,
        "split_mode": known(serving_value.get("split_mode")) or None,
        "n_gpu_layers": known(serving_value.get("gpu_layers")) or None,
        "thinking": known(serving_value.get("thinking")) or None,
        "reasoning_budget": serving_value.get("reasoning_budget"),
        "speculative": _speculative(str(spec.get("type") or "")),
        "spec_draft_n": spec.get("draft_n") or None,
        "params_b": params,
        "active_params_b": active if moe or active else None,
        "moe": True if moe or active else None,
    }
    commit = runtime.get("commit", required=False).str()
    version = " ".join(
        part
        for part in (runtime.get("version", required=False).str(), commit and f"({commit})")
        if part
    )
    return speed_record(
        method=SOURCE,
        row_id=ids[0],
        started_at=result.get("timestamp_utc").timestamp(),
        model_id=model_id,
        quantization=quant,
        engine=engine,
        engine_version=version[:80],
        context_length=serving.get("context_tokens", required=False).int(minimum=1)
        if serving.value is not None
        else None,
        kv_cache_type=kv_cache(serving_value.get("kv_cache_k"), serving_value.get("kv_cache_v"))[
            :40
        ],
        launch_settings=settings,
        hardware=hardware,
        speed=speed,
        speed_sample_count=bench.get("runs", required=False).int(minimum=1),
        total_runtime_sec=metrics.get("wall_seconds", required=False).num(minimum=0),
        provenance=provenance(
            source=SOURCE,
            repository=CLUB_REPOSITORY,
            commit=CLUB_COMMIT,
            path=f"data/results/{path.name}",
            row_ids=ids,
            promotion_level=result.get("promotion_level").str() or None,
        ),
        raw=scrub_tree(result.obj()),
    )


# --- community-results.csv ---------------------------------------------------------------


def detect_csv_header(first_line: str) -> bool:
    columns = [c.strip().lower() for c in first_line.strip().split(",")]
    return all(name in columns for name in (*_REQUIRED_CSV, "mtp_or_spec", "tp_or_split"))


def parse_csv(path: Path, text: str) -> Parsed:
    reader = csv.reader(io.StringIO(text))
    try:
        header = [c.strip().lower() for c in next(reader)]
    except StopIteration:
        raise FormatError("line 1", "the file is empty") from None
    except csv.Error as exc:
        raise FormatError("line 1", f"not a CSV table: {exc}") from None
    missing = [name for name in _REQUIRED_CSV if name not in header]
    if missing:
        raise FormatError("line 1", f"column {missing[0]!r} is missing")
    report = SourceReport(SOURCE, files=1)
    rows = []
    try:
        for cells in reader:
            line = reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                raise FormatError(
                    f"line {line}", f"{len(cells)} cells where the header has {len(header)}"
                )
            row = dict(zip(header, (c.strip() for c in cells), strict=True))
            for name, value in row.items():
                problem = bounds.text_problem(value, bounds.TEXT)
                if problem:
                    raise FormatError(f"line {line}, column {name}", problem)
            rows.append((line, row))
    except csv.Error as exc:
        raise FormatError(f"line {reader.line_num}", f"not a CSV table: {exc}") from None
    report.rows = len(rows)
    records: list[RunRecord] = []
    for group in merge_repeats(
        rows,
        key=lambda r: normalize.canonical_hash({k: v for k, v in r[1].items() if k != "date"}),
        order=lambda r: (r[1]["date"], r[0]),
    ):
        ids = [_csv_row_id(row) for _line, row in group]
        lines = [n for n, _ in group]
        _keep(records, report, ids, lambda: _csv_record(group[0][0], group[0][1], ids, lines))  # noqa: B023
    report.records = len(records)
    return Parsed(records, report)


def _csv_row_id(row: dict[str, str]) -> str:
    """The table has no ids: a row is known by its content (line numbers shift when rows are
    added above it)."""
    digest = hashlib.sha256(repr(sorted(row.items())).encode()).hexdigest()[:12]
    return f"csv-{digest}"


def _csv_record(line: int, row: dict[str, str], ids: list[str], lines: list[int]) -> RunRecord:
    where = f"line {line}"
    try:
        started = datetime.strptime(row["date"], "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise FormatError(f"{where}, column date", f"not a date: {row['date'][:20]!r}") from None
    if problem := bounds.moment_problem(started):
        raise FormatError(f"{where}, column date", f"date {problem}")
    count = _whole(row, "gpu_count", where) or 1
    per_card = number(row.get("vram_per_gpu_gb"))
    cpu = cpu_name(row.get("cpu"))
    hardware = _checked(
        HardwareRecord(
            cpu=cpu,
            gpu=gpu_name(row.get("gpu_model"), cpu=cpu),
            gpu_count=count,
            vram_gb=per_card * count if per_card else None,
            ram_gb=number(row.get("host_ram_gb")),
        )
    )
    runtime = row.get("runtime", "")
    engine = engine_name(runtime)
    # "Qwen3.6 27B" in the table is "Qwen3.6-27B" in the results JSON.
    name = re.sub(r"\s+", "-", known(row.get("model")))
    quant_text = re.sub(r"^gguf\s+", "", known(row.get("quant")), flags=re.IGNORECASE)
    model_id, quant = model_id_and_quant(name, quantization=quant_text, engine=engine)
    if not model_id:
        raise _LeftOut(f"{MODEL_NOT_MAPPED}: empty model")
    decode = number(row.get("decode_tok_s"))
    notes = row.get("notes", "")
    prefill = re.search(r"prompt eval (\d+(?:\.\d+)?) tok/s", notes)
    if not decode:
        raise _LeftOut(f"no speed figure ({row.get('decode_tok_s') or 'empty'})", figure=True)
    generated = re.search(r"(\d+) generated tokens", notes)
    needle = re.search(r"(\d+)-token needle", notes)
    spec_text = known(row.get("mtp_or_spec")).lower()
    speculative = _speculative(spec_text, runtime=runtime) if spec_text else ""
    draft_n = _COUNT_IN.search(spec_text) if speculative else None
    split = known(row.get("tp_or_split"))
    settings = {
        "speculative": speculative,
        "spec_draft_n": int(draft_n.group(1)) if draft_n else None,
        "output_tokens": int(generated.group(1)) if generated else None,
        "prompt_tokens": int(needle.group(1)) if needle else None,
        **_split(split, engine),
    }
    return speed_record(
        method=SOURCE,
        row_id=ids[0],
        started_at=started,
        model_id=model_id,
        quantization=quant,
        engine=engine,
        engine_version=known(row.get("runtime_version"))[:80],
        context_length=_whole(row, "context_tokens", where),
        kv_cache_type=kv_cache(row.get("kv_cache"))[:40],
        launch_settings=settings,
        hardware=hardware,
        speed={
            "decode_tps_median": decode,
            "prefill_tps_median": float(prefill.group(1)) if prefill else None,
        },
        provenance=provenance(
            source=SOURCE,
            repository=CLUB_REPOSITORY,
            commit=CLUB_COMMIT,
            path="data/community-results.csv",
            row_ids=ids,
            lines=lines,
        ),
        raw={k: scrub_text(v) for k, v in row.items() if k != "contributor"},  # a name, not a fact
    )


def _whole(row: dict[str, str], column: str, where: str) -> int | None:
    value = known(row.get(column))
    if not value:
        return None
    if not value.isdigit():
        raise FormatError(f"{where}, column {column}", f"expected a whole number, got {value!r}")
    return int(value)


def _split(text: str, engine: str) -> dict[str, str | int]:
    """The table's tp_or_split: a tensor split ("51,49"), a layer count ("ngl60"), all layers
    on the GPU ("gpu-only") or, for vLLM, a tensor-parallel degree ("2")."""
    value = text.lower()
    if not value:
        return {}
    if value == "gpu-only":
        return {"n_gpu_layers": "all"}
    if match := re.fullmatch(r"ngl\s*(\d+)", value):
        return {"n_gpu_layers": int(match.group(1))}
    if value.isdigit() and engine in ("vllm", "sglang"):
        return {"tensor_parallel": int(value)}
    return {"tensor_split": text}


def _speculative(kind: str, *, runtime: str = "") -> str:
    """mtp, ngram, draft or "" for the club's speculation words ("draft-mtp", "MTP n=3",
    "draft2" on its "llama.cpp MTP" builds, "none")."""
    value = kind.lower()
    if not value or value in ("none", "off", "no", "false"):
        return ""
    if "mtp" in value or "mtp" in runtime.lower():
        return "mtp"
    if "ngram" in value:
        return "ngram"
    return "draft" if "draft" in value or "eagle" in value else "yes"


def _params(text: str) -> tuple[float | None, float | None]:
    """(total, active) billions from "27B", "35B A3B" or "122B total / 10B active"."""
    match = _PARAMS.search(text or "")
    if not match:
        return None, None
    active = match.group(2) or match.group(3)
    return float(match.group(1)), float(active) if active else None


def _checked(hardware: HardwareRecord) -> HardwareRecord:
    problem = hardware_problem(hardware)
    if problem:
        raise _LeftOut(problem)
    return hardware
