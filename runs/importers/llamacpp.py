"""llama.cpp's own names, shared by the llama-bench and llama-benchy readers: the measurement
a file holds (tests with their rates and samples), the device lines llama.cpp prints to stderr,
its model types and file-type names, its backends, and the settings that name a stack.

Django-free, like every importer (parser processes load it).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from runs import normalize
from runs.importers.records import FormatError, HardwareRecord, JsonObject

# Backends by how llama.cpp registers them, a GPU's first; anything else (BLAS, AMX) is CPU.
_BACKENDS = (
    ("cuda", "CUDA"), ("rocm", "ROCm"), ("hip", "ROCm"), ("musa", "MUSA"), ("metal", "Metal"),
    ("mtl", "Metal"), ("vulkan", "Vulkan"), ("sycl", "SYCL"), ("opencl", "OpenCL"),
    ("cann", "CANN"), ("kompute", "Kompute"), ("webgpu", "WebGPU"), ("rpc", "RPC"),
)  # fmt: skip
# Settings shown with every run; the others only when they differ from llama-bench's default,
# so that a newer build that prints one more field does not split a stack.
CORE_SETTINGS = ("n_gpu_layers", "n_batch", "n_ubatch", "n_threads", "type_k", "type_v")
DEFAULT_SETTINGS: dict[str, Any] = dict(
    n_cpu_moe=0, split_mode="layer", main_gpu=0, no_kv_offload=False, devices="auto",
    tensor_split="0.00", tensor_buft_overrides="none", cpu_mask="0x0", cpu_strict=False,
    poll=50, load_mode="auto", lazy_mode="auto", embeddings=False, no_op_offload=False,
    no_host=False, repack=True, use_mmap=True, use_direct_io=False, mul_mat_q=True,
    fit_target=0, fit_min_ctx=0,
)  # fmt: skip
_FLASH = {-1: "auto", 0: "off", 1: "on"}


@dataclass
class Test:
    """One test of a measurement: what it ran, its mean rate and, where the format has them,
    its samples (tok/s per repetition, or per request for llama-benchy)."""

    name: str
    phase: str  # prefill, decode, combined (pp+tg), or context (llama-benchy's context load)
    n_prompt: int
    n_gen: int
    depth: int = 0
    concurrency: int = 1
    mean: float | None = None
    stdev: float | None = None
    samples: list[float] = field(default_factory=list)
    samples_ns: list[int] = field(default_factory=list)
    # llama-benchy: per-request rates, end-to-end TTFT (ms) per request, other figures.
    per_request: list[float] = field(default_factory=list)
    per_request_mean: float | None = None
    ttft_ms: list[float] = field(default_factory=list)
    ttft_mean: float | None = None
    at: datetime | None = None
    where: str = ""


@dataclass
class Measurement:
    """Tests run with one set of settings, on one model, by one build: one run."""

    method: str
    kind: str  # the detected format, e.g. "llama-bench-json"
    model_file: str = ""  # a file's base name, never its path
    model_type: str = ""
    model_name: str = ""
    model: JsonObject = field(default_factory=dict)
    engine: str = "llama.cpp"
    build_commit: str = ""
    build_number: int | None = None
    settings: JsonObject = field(default_factory=dict)
    kv_cache_type: str = ""
    hardware: HardwareRecord | None = None
    tests: list[Test] = field(default_factory=list)
    rows: list[JsonObject] = field(default_factory=list)
    source: JsonObject = field(default_factory=dict)
    key: str = ""


# ------------------------------------------------------------------------ Markdown tables


_SEPARATOR = re.compile(r"^\|(?:\s*:?-+:?\s*\|)+\s*$")


def table_cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") else body
    return [cell.strip() for cell in body.split("|")]


def find_tables(text: str) -> list[tuple[int, list[str]]]:
    """(line index, column names) of each Markdown table: a row of cells over a separator."""
    lines = text.splitlines()
    return [
        (i, table_cells(line))
        for i, line in enumerate(lines[:-1])
        if line.strip().startswith("|") and _SEPARATOR.match(lines[i + 1].strip())
    ]


# ---------------------------------------------------------------------------- device lines


@dataclass
class Devices:
    """GPUs (and a CPU) named by the lines llama.cpp prints to stderr, and their backend."""

    gpus: list[str] = field(default_factory=list)
    vram_mib: float | None = None
    cpu: str = ""
    backend: str = ""


_CUDA_FOUND = re.compile(r"ggml_cuda_init: found (\d+) (CUDA|ROCm|MUSA) devices")
_CUDA_DEVICE = re.compile(r"^\s*Device \d+: (?P<name>[^,]+),(?P<rest>.*)$")
_VRAM = re.compile(r"VRAM: (\d+) MiB")
_VULKAN = re.compile(r"ggml_vulkan: \d+ = (?P<name>.+?)(?: \([^()]*\))* \|")
_METAL = re.compile(
    r"ggml_metal(?:_device)?_init: (?:GPU name:\s+(?:MTL\d+ \((?P<desc>[^)]+)\)|(?P<name>.+))"
    r"|found device: (?P<found>.+))$"
)
_SYCL = re.compile(r"^\|\s*\d+\|\s*\[?level_zero:gpu:\d+\]?\|\s*(?P<name>[^|]+?)\s*\|")
_CPU_DEVICE = re.compile(r"registered device CPU \((?P<name>[^)]+)\)")


def read_devices(text: str) -> Devices:
    found = Devices()
    cuda_backend = ""
    for line in text.splitlines():
        if match := _CUDA_FOUND.search(line):
            cuda_backend = match[2]
            found.backend = found.backend or cuda_backend
        elif cuda_backend and (match := _CUDA_DEVICE.match(line)):
            found.gpus.append(match["name"].strip())
            if vram := _VRAM.search(match["rest"]):
                found.vram_mib = (found.vram_mib or 0) + float(vram[1])
        elif match := _VULKAN.search(line):
            found.gpus.append(match["name"].strip())
            found.backend = found.backend or "Vulkan"
        elif match := _METAL.search(line.strip()):
            name = (match["desc"] or match["name"] or match["found"] or "").strip()
            if name and not re.fullmatch(r"MTL\d+", name) and name not in found.gpus:
                found.gpus.append(name)
            found.backend = found.backend or "Metal"
        elif match := _SYCL.match(line.strip()):
            found.gpus.append(match["name"].strip())
            found.backend = found.backend or "SYCL"
        elif match := _CPU_DEVICE.search(line):
            found.cpu = match["name"].strip()
    return found


# ----------------------------------------------------------------- models and settings


def model_basename(path: str) -> str:
    """A model file's name without its folders (never a local path), as llama.cpp names it."""
    return re.split(r"[\\/]", path.strip())[-1]


# llama.cpp's file-type names (llama_model_ftype_name) and the quantization labels they mean.
_FTYPE_SIZES = {"Small": "S", "Medium": "M", "Large": "L"}


def describe_model_type(model_type: str) -> dict[str, str]:
    """{architecture, size_label, quantization} from llama-bench's model_type, e.g.
    "llama 8B Q4_K - Medium" → llama, 8B, Q4_K_M; "llama 7B mostly Q4_0" (old builds) → Q4_0."""
    parts = model_type.split(None, 2)
    if len(parts) < 3:
        return {"architecture": parts[0] if parts else "", "size_label": "", "quantization": ""}
    return {"architecture": parts[0], "size_label": parts[1], "quantization": quant_label(parts[2])}


def quant_label(ftype: str) -> str:
    text = re.sub(r"^mostly\s+|\s*\(guessed\)$", "", ftype.strip())
    if text == "Q2_K - Medium":
        return "Q2_K"  # llama.cpp's plain Q2_K is named "Medium"; Q2_K_S is "Small"
    if text.startswith("IQ3_S mix"):
        return "IQ3_M"
    if match := re.fullmatch(r"(\w+) - (Small|Medium|Large)", text):
        return f"{match[1]}_{_FTYPE_SIZES[match[2]]}"
    text = re.sub(r"\s+-\s+[0-9.]+\s*bpw.*$", "", text)  # "IQ4_XS - 4.25 bpw"
    text = {"all F32": "F32", "MXFP4 MoE": "MXFP4"}.get(text, text)
    return normalize.normalise_quant(text.replace(" ", "_"))


def canonical_backend(values: JsonObject, devices: Devices | None = None) -> str:
    """CUDA, ROCm, Metal, Vulkan, SYCL, … or CPU, from `backends` or old builds' booleans."""
    names = [n.strip() for n in str(values.get("backends") or "").split(",") if n.strip()]
    names += [flag for flag, *_ in _BACKENDS if values.get(flag) is True]
    backend = ""
    for flag, label in _BACKENDS:
        if any(n.lower().startswith(flag) for n in names):
            backend = label
            break
    if not backend and devices is not None and devices.backend:
        backend = devices.backend
    backend = backend or ("CPU" if names or "n_threads" in values else "")
    gpu = str(values.get("gpu_info") or "")
    if backend == "CUDA" and normalize.gpu_vendor(gpu) == "amd":
        backend = "ROCm"  # builds before the ROCm name reported hipBLAS as cuda
    return backend


def launch_settings(settings: JsonObject, backend: str) -> tuple[JsonObject, str]:
    """The settings that name a stack, and its KV-cache type."""
    out: dict[str, Any] = {"backend": backend} if backend else {}
    for name in CORE_SETTINGS:
        if settings.get(name) is not None:
            out[name] = settings[name]
    flash = settings.get("flash_attn")
    if flash is not None:
        on_off = {True: "on", False: "off"} if isinstance(flash, bool) else _FLASH
        out["flash_attn"] = on_off.get(flash, str(flash).lower())
    if "type_k" not in out and settings.get("f16_kv") is not None:
        out["type_k"] = out["type_v"] = "f16" if settings["f16_kv"] else "f32"
    for name, default in DEFAULT_SETTINGS.items():
        value = settings.get(name)
        if value is not None and value != default:  # (False == 0: old bools match new ints)
            out[name] = value
    k, v = str(out.get("type_k") or ""), str(out.get("type_v") or "")
    kv = k if k == v else f"{k}/{v}" if k and v else k or v
    if kv:
        out["kv_cache_type"] = kv
    return out, kv


__all__ = [
    "Devices",
    "Measurement",
    "Test",
    "canonical_backend",
    "describe_model_type",
    "find_tables",
    "launch_settings",
    "model_basename",
    "quant_label",
    "read_devices",
    "table_cells",
]


def csv_table(
    text: str, check: Callable[[list[str]], None], *, why: str = ""
) -> list[tuple[str, dict[str, str]]]:
    """(line, {column: text}) for each row of a CSV file with a header, blank lines skipped;
    `check` refuses a header that is not the tool's, and a row of another width is an error
    naming its line (`why` says what that likely means)."""
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        return []
    except csv.Error as exc:
        raise FormatError("line 1", f"not CSV: {exc}") from None
    check(header)
    rows = []
    try:
        for values in reader:
            if not any(v.strip() for v in values):
                continue
            where = f"line {reader.line_num}"
            if len(values) != len(header):
                raise FormatError(where, f"{len(values)} values for {len(header)} columns{why}")
            rows.append((where, dict(zip(header, values, strict=True))))
    except csv.Error as exc:
        raise FormatError(f"line {reader.line_num}", f"not CSV: {exc}") from None
    return rows
