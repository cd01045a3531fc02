"""llama-bench's output, in every format it writes, read into measurements by field name.

llama-bench (llama.cpp's tools/llama-bench) writes one row per test in `-o json`, `jsonl`, `csv`,
`sql` and the default Markdown table. Rows are read by their field or column names, never by
position: builds differ (old ones wrote per-backend booleans `cuda`, `metal`, … where newer
ones write `backends`, and `f16_kv` before `type_k`/`type_v`), and forks add fields. Unknown
fields travel with the row into the stored payload. The Markdown table shows only what differs
from llama-bench's defaults and no hardware; the device lines llama.cpp prints to stderr
(`ggml_cuda_init: found 1 CUDA devices`, `ggml_vulkan: 0 = …`, Metal's `GPU name:`), when they
are pasted above it, name the GPUs.

Rows with the same settings (everything but the test and its timings) make one Measurement:
runs.importers.external turns each into a run. Django-free.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from runs import bounds
from runs.importers.llamacpp import (
    Devices,
    Measurement,
    Test,
    canonical_backend,
    csv_table,
    describe_model_type,
    find_tables,
    launch_settings,
    model_basename,
    read_devices,
    table_cells,
)
from runs.importers.records import FormatError, HardwareRecord, JsonObject, load_json

# Field types as llama-bench declares them (test::get_field_type), with old builds' fields.
INT_FIELDS = frozenset({
    "build_number", "n_batch", "n_ubatch", "n_threads", "poll", "model_size", "model_n_params",
    "n_gpu_layers", "main_gpu", "n_prompt", "n_gen", "n_depth", "avg_ns", "stddev_ns",
    "no_op_offload", "n_cpu_moe", "fit_target", "fit_min_ctx", "flash_attn",
})  # fmt: skip
BOOL_FIELDS = frozenset({
    "f16_kv", "no_kv_offload", "cpu_strict", "embeddings", "no_host", "repack", "use_mmap",
    "use_direct_io", "mul_mat_q", "cuda", "vulkan", "kompute", "metal", "sycl", "rpc",
    "gpu_blas", "blas", "opencl",
})  # fmt: skip
FLOAT_FIELDS = frozenset({"avg_ts", "stddev_ts"})
# What one test measured, as opposed to the settings it ran with.
TEST_FIELDS = frozenset({
    "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts",
    "samples_ns", "samples_ts", "test", "t/s", "concurrency",
})  # fmt: skip
# The Markdown table's column names for llama-bench's fields (get_field_display_name).
DISPLAY_NAMES = dict(
    model="model_type", size="model_size", params="model_n_params", backend="backends",
    ngl="n_gpu_layers", sm="split_mode", threads="n_threads", nkvo="no_kv_offload",
    fa="flash_attn", lm="load_mode", lzm="lazy_mode", embd="embeddings", nopo="no_op_offload",
    noh="no_host", rpk="repack", dev="devices", ts="tensor_split", ot="tensor_buft_overrides",
    fitt="fit_target", fitc="fit_min_ctx", mmap="use_mmap", mmq="mul_mat_q",
)  # fmt: skip
MAX_ROWS = 5000
MAX_SAMPLES = 10_000


# --------------------------------------------------------------------------- reading rows


@dataclass
class _Row:
    values: dict[str, Any]
    where: str  # "[3]" (a JSON array), "line 7"
    at_field: str = ""  # how to name a field of this row in an error: "{where}.{name}"

    def position(self, name: str) -> str:
        return f"{self.where}.{name}" if self.at_field == "." else f"{self.where}: column {name}"


def read_measurements(text: str, kind: str) -> list[Measurement]:
    """Every measurement in a llama-bench file of the given kind (external.detect_external)."""
    fmt = kind.removeprefix("llama-bench-")
    reader = {"json": _json_rows, "jsonl": _jsonl_rows, "csv": _csv_rows, "sql": _sql_rows}
    if fmt == "md":
        rows, build, devices = _md_rows(text)
    elif fmt in reader:
        rows, build, devices = reader[fmt](text), None, Devices()
    else:
        raise ValueError(f"not a llama-bench format: {kind}")
    if not rows:
        raise FormatError("", "the file holds no llama-bench results")
    if len(rows) > MAX_ROWS:
        raise FormatError("", f"more than {MAX_ROWS} results in one file")
    groups: dict[str, Measurement] = {}
    for row in rows:
        if build is not None:
            row.values.setdefault("build_commit", build[0])
            row.values.setdefault("build_number", build[1])
        test = _test(row)
        settings = {k: v for k, v in row.values.items() if k not in TEST_FIELDS}
        key = json.dumps(settings, sort_keys=True, default=str)
        if key not in groups:
            groups[key] = _measurement(kind, row, settings, devices, key)
        groups[key].tests.append(test)
        groups[key].rows.append(_public_row(row.values))
    return list(groups.values())


def _json_rows(text: str) -> list[_Row]:
    document = load_json(text, position="line {line} column {column}")
    if isinstance(document, dict) and isinstance(document.get("results"), list):
        document = document["results"]  # a wrapper some scripts add around the list
    if not isinstance(document, list):
        raise FormatError("(top level)", "expected llama-bench's list of results")
    return [_object_row(item, f"[{i}]") for i, item in enumerate(document)]


def _jsonl_rows(text: str) -> list[_Row]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            item = load_json(line, position=f"line {number} column {{column}}")
            rows.append(_object_row(item, f"line {number}"))
    return rows


def _object_row(item: object, where: str) -> _Row:
    if not isinstance(item, dict):
        raise FormatError(where, "expected an object (one llama-bench result)")
    row = _Row({}, where, ".")
    for name, value in item.items():
        row.values[str(name)] = _typed(row, str(name), value)
    return row


def _csv_rows(text: str) -> list[_Row]:
    rows = csv_table(
        text,
        lambda header: _check_columns(header, "line 1"),
        why=" (truncated or not from the header's llama-bench build)",
    )
    return [_text_row(values, where) for where, values in rows]


_INSERT = re.compile(
    r"INSERT\s+INTO\s+\w+\s*\((?P<cols>[^)]*)\)\s*VALUES\s*\((?P<vals>.*)\)\s*;?\s*$"
)
_SQL_VALUE = re.compile(r"\s*(?:'((?:[^']|'')*)'|(NULL)|([-+]?[0-9.eE+-]+))\s*(,|$)")


def _sql_rows(text: str) -> list[_Row]:
    """INSERT statements, one a line as llama-bench writes them; its CREATE TABLE is skipped."""
    rows: list[_Row] = []
    in_create = False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("--"):
            continue
        if stripped.upper().startswith("CREATE TABLE"):
            in_create = not stripped.endswith(";")
            continue
        if in_create:
            in_create = not stripped.endswith(");")
            continue
        where = f"line {number}"
        match = _INSERT.match(stripped)
        if not match:
            raise FormatError(where, "expected an INSERT INTO … VALUES (…); statement")
        columns = [c.strip() for c in match["cols"].split(",")]
        values = _sql_values(match["vals"], where)
        if len(values) != len(columns):
            raise FormatError(where, f"{len(values)} values for {len(columns)} columns")
        if not rows:
            _check_columns(columns, where)
        rows.append(_text_row(dict(zip(columns, values, strict=True)), where))
    if in_create:
        raise FormatError("", "the CREATE TABLE statement is not closed (a truncated file?)")
    return rows


def _sql_values(text: str, where: str) -> list[str]:
    values, position = [], 0
    while position < len(text):
        match = _SQL_VALUE.match(text, position)
        if not match or match.end() == position:
            raise FormatError(where, f"cannot read the VALUES list at character {position + 1}")
        quoted, null, number = match.group(1), match.group(2), match.group(3)
        values.append("" if null else (quoted.replace("''", "'") if quoted is not None else number))
        position = match.end()
    return values


def _check_columns(columns: list[str], where: str) -> None:
    for required in ("n_prompt", "n_gen"):
        if required not in columns:
            raise FormatError(where, f"column {required!r} is missing: not llama-bench output")
    if not {"avg_ts", "samples_ts"} & set(columns):
        raise FormatError(where, "column 'avg_ts' is missing: the results have no rate")


def _text_row(values: dict[str, str], where: str) -> _Row:
    row = _Row({}, where)
    for name, value in values.items():
        row.values[name] = _typed(row, name, value)
    return row


def _typed(row: _Row, name: str, value: Any) -> Any:
    """A field's value in its llama-bench type; a CSV, SQL or Markdown value is text."""
    where = row.position(name)
    if isinstance(value, str) and name not in INT_FIELDS | BOOL_FIELDS | FLOAT_FIELDS:
        problem = bounds.text_problem(value, bounds.NAME) if len(value) <= 2000 else "too long"
        if problem:
            raise FormatError(where, problem)
        return value
    if value is None or value == "":
        return None
    if name in BOOL_FIELDS:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true"):
            return True
        if text in ("0", "false"):
            return False
        raise FormatError(where, f"expected true or false, got {str(value)[:40]!r}")
    if name in INT_FIELDS:
        if isinstance(value, bool):
            return int(value)  # flash_attn was a boolean before it took auto
        try:
            number = float(value) if isinstance(value, str) else value
            if isinstance(number, int | float) and math.isfinite(number) and number == int(number):
                return int(number)
        except (TypeError, ValueError, OverflowError):
            pass
        raise FormatError(where, f"expected a whole number, got {str(value)[:40]!r}")
    if name in FLOAT_FIELDS:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise FormatError(where, f"expected a number, got {str(value)[:40]!r}") from None
        if not math.isfinite(number) or number < 0:
            raise FormatError(where, f"expected a rate ≥ 0, got {str(value)[:40]!r}")
        return number
    if name in ("samples_ts", "samples_ns"):
        if not isinstance(value, list) or len(value) > MAX_SAMPLES:
            raise FormatError(where, "expected a list of numbers")
        for item in value:
            ok = isinstance(item, int | float) and not isinstance(item, bool)
            if not ok or not math.isfinite(item) or item < 0:
                raise FormatError(where, f"expected numbers ≥ 0, got {str(item)[:40]!r}")
        return value
    if isinstance(value, dict | list):
        return value  # a fork's structured field: kept as sent
    return value


# ------------------------------------------------------------------------------ Markdown


_FOOTER = re.compile(r"^build:\s*(\S+)\s*\((\d+)\)\s*$")
_TEST = re.compile(
    r"^(?:pp\s*(?P<pp>\d+))?\s*\+?\s*(?:tg\s*(?P<tg>\d+))?"
    r"(?:\s*@\s*d\s*(?P<depth>\d+))?(?:\s*\(c(?P<c>\d+)\))?$"
)
_RATE = re.compile(r"^(?P<mean>[0-9.]+(?:e[-+]?\d+)?)\s*(?:±|\+/-)\s*(?P<std>[0-9.]+|nan)$")
_SIZE = re.compile(r"^([0-9.]+)\s*(KiB|MiB|GiB|TiB)$")
_PARAMS = re.compile(r"^([0-9.]+)\s*([KMBT])$")


def _md_rows(text: str) -> tuple[list[_Row], tuple[str, int] | None, Devices]:
    lines = text.splitlines()
    tables = [(i, cols) for i, cols in find_tables(text) if "test" in cols and "t/s" in cols]
    if not tables:
        raise FormatError("", "no llama-bench table: expected a header with 'test' and 't/s'")
    rows: list[_Row] = []
    starts = {i for i, _ in tables}
    for index, columns in tables:
        names = [DISPLAY_NAMES.get(c, c) for c in columns]
        number = index + 2
        while number < len(lines):
            line = lines[number].strip()
            if number in starts or not line.startswith("|"):
                if line.startswith("|") or line.startswith("build:") or not line:
                    break
                number += 1  # a stderr line pasted between rows
                continue
            cells = table_cells(line)
            where = f"line {number + 1}"
            if len(cells) != len(names):
                raise FormatError(where, f"{len(cells)} cells for {len(names)} columns")
            rows.append(_md_row(dict(zip(names, cells, strict=True)), where))
            number += 1
    build = None
    for line in lines:
        if match := _FOOTER.match(line.strip()):
            build = (match[1], int(match[2]))
    return rows, build, read_devices(text)


def _md_row(cells: dict[str, str], where: str) -> _Row:
    row = _Row({}, where)
    test, rate = cells.pop("test"), cells.pop("t/s")
    match = _TEST.match(test)
    if not match or not (match["pp"] or match["tg"]):
        raise FormatError(f"{where}: column test", f"unrecognised test {test[:40]!r}")
    row.values.update(
        n_prompt=int(match["pp"] or 0),
        n_gen=int(match["tg"] or 0),
        n_depth=int(match["depth"] or 0),
    )
    if match["c"]:
        row.values["concurrency"] = int(match["c"])
    rated = _RATE.match(rate)
    if not rated:
        raise FormatError(f"{where}: column t/s", f"expected 'mean ± stdev', got {rate[:40]!r}")
    row.values["avg_ts"] = float(rated["mean"])
    std = float(rated["std"])
    row.values["stddev_ts"] = std if math.isfinite(std) else None
    sizes = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
    counts = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
    for name, value in cells.items():
        if name == "model_size":
            row.values[name] = _scaled(value, _SIZE, sizes, row, name)
        elif name == "model_n_params":
            row.values[name] = _scaled(value, _PARAMS, counts, row, name)
        else:
            row.values[name] = _typed(row, name, value)
    return row


def _scaled(
    value: str, pattern: re.Pattern[str], units: Mapping[str, float], row: _Row, name: str
) -> int | None:
    if not value:
        return None
    match = pattern.match(value)
    if not match:
        raise FormatError(row.position(name), f"unrecognised {name} {value[:40]!r}")
    return int(round(float(match[1]) * units[match[2]]))


# ---------------------------------------------------------------------------- measurements


def _test(row: _Row) -> Test:
    values = row.values
    for name in ("n_prompt", "n_gen"):
        if values.get(name) is None:
            raise FormatError(row.position(name), "is missing (this build's results lack it)")
    n_prompt, n_gen = values["n_prompt"], values["n_gen"]
    depth = values.get("n_depth") or 0
    if n_prompt < 0 or n_gen < 0 or depth < 0 or (n_prompt == 0 and n_gen == 0):
        raise FormatError(row.position("n_prompt"), "a test needs n_prompt or n_gen above 0")
    phase = "combined" if n_prompt and n_gen else "prefill" if n_prompt else "decode"
    samples_ns = [int(v) for v in values.get("samples_ns") or []]
    samples = [float(v) for v in values.get("samples_ts") or []]
    if not samples and samples_ns:
        samples = [(n_prompt + n_gen) * 1e9 / ns for ns in samples_ns if ns > 0]
    if samples_ns and samples and len(samples_ns) != len(samples):
        raise FormatError(row.position("samples_ts"), "samples_ts and samples_ns differ in length")
    mean = values.get("avg_ts")
    if mean is None and samples:
        mean = sum(samples) / len(samples)
    if mean is None:
        raise FormatError(row.position("avg_ts"), "is missing (the result has no rate)")
    name = f"pp{n_prompt}" if n_prompt else ""
    name += ("+" if name and n_gen else "") + (f"tg{n_gen}" if n_gen else "")
    concurrency = values.get("concurrency") or 1
    name += f" @ d{depth}" if depth else ""
    name += f" (c{concurrency})" if concurrency > 1 else ""
    return Test(
        name=name,
        phase=phase,
        n_prompt=n_prompt,
        n_gen=n_gen,
        depth=depth,
        concurrency=concurrency,
        mean=mean,
        stdev=values.get("stddev_ts"),
        samples=samples,
        samples_ns=samples_ns,
        at=_moment(row),
        where=row.where,
    )


def _moment(row: _Row) -> datetime | None:
    text = row.values.get("test_time")
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise FormatError(
            row.position("test_time"), f"not a timestamp: {str(text)[:40]!r}"
        ) from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    if problem := bounds.moment_problem(moment):
        raise FormatError(row.position("test_time"), problem)
    return moment


def _measurement(
    kind: str, row: _Row, settings: JsonObject, devices: Devices, key: str
) -> Measurement:
    values = row.values
    model_file = model_basename(str(values.get("model_filename") or ""))
    model_type = str(values.get("model_type") or "")
    if not model_file and not model_type:
        raise FormatError(row.position("model_filename"), "is missing, and so is model_type")
    model: JsonObject = {
        **describe_model_type(model_type),
        "file": model_file,
        "params": values.get("model_n_params"),
        "size_bytes": values.get("model_size"),
    }
    backend = canonical_backend(values, devices)
    out = Measurement(
        method="llama-bench",
        kind=kind,
        model_file=model_file,
        model_type=model_type,
        model=model,
        build_commit=str(values.get("build_commit") or ""),
        build_number=values.get("build_number"),
        key=key,
    )
    out.settings, out.kv_cache_type = launch_settings(settings, backend)
    if isinstance(values.get("model_n_params"), int) and values["model_n_params"] > 0:
        # As the community importers record it: parameters in billions, from the file itself.
        out.settings["params_b"] = round(values["model_n_params"] / 1e9, 4)
    out.hardware = _hardware(values, devices)
    out.source = {"tool": "llama-bench", "format": kind.removeprefix("llama-bench-")}
    if devices.gpus or devices.backend:
        out.source["devices"] = {"gpus": devices.gpus, "backend": devices.backend}
    return out


def _hardware(values: JsonObject, devices: Devices) -> HardwareRecord | None:
    cpu = str(values.get("cpu_info") or "").strip() or devices.cpu
    gpu_info = str(values.get("gpu_info") or "").strip()
    gpus = [g.strip() for g in gpu_info.split(",") if g.strip()] if gpu_info else devices.gpus
    if not cpu and not gpus:
        return None
    vram = round(devices.vram_mib / 1024, 1) if devices.vram_mib and not gpu_info else None
    return HardwareRecord(cpu=cpu, gpu=", ".join(gpus), gpu_count=max(len(gpus), 1), vram_gb=vram)


def _public_row(values: JsonObject) -> JsonObject:
    """The row as stored: every field as read, the model's path reduced to its file name."""
    out = dict(values)
    if out.get("model_filename"):
        out["model_filename"] = model_basename(str(out["model_filename"]))
    return out


__all__ = ["DISPLAY_NAMES", "read_measurements"]
