"""Physical ceilings on a run's speed: bytes read per decoded token and FLOPs per prefilled token.

Decoding one token reads every active weight once, so decode tok/s cannot beat memory bandwidth
÷ active weight bytes; prefilling one token costs 2 FLOPs per active parameter, so prefill tok/s
cannot beat peak throughput ÷ (2 × active parameters). Each input is taken at the end that
makes the ceiling higher (the fewest bits a format stores, the fastest variant of a product),
so a genuine run stays under it. No Django here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runs import normalize
from runs.accelerators import Accelerator, Catalog

# The fewest bits per weight each format stores, block scales included (llama.cpp's ggml block
# layouts: Q4_K is 144 bytes per 256 weights = 4.5). Mixed GGUF presets (Q4_K_M, Q3_K_L) mostly
# use their base type and put some tensors at a higher one, so the base is the lower bound.
QUANT_BITS = {
    "F32": 32.0,
    "FP32": 32.0,
    "F16": 16.0,
    "FP16": 16.0,
    "BF16": 16.0,
    "Q8_0": 8.5,
    "Q6_K": 6.5625,
    "Q5_1": 6.0,
    "Q5_0": 5.5,
    "Q5_K": 5.5,
    "Q4_1": 5.0,
    "Q4_0": 4.5,
    "Q4_K": 4.5,
    "IQ4_NL": 4.5,
    "IQ4_XS": 4.25,
    "MXFP4": 4.25,
    "Q3_K": 3.4375,
    "IQ3_S": 3.4375,
    "IQ3_M": 3.4375,
    "IQ3_XS": 3.0625,
    "IQ3_XXS": 3.0625,
    "Q2_K": 2.625,
    "IQ2_M": 2.5,
    "IQ2_S": 2.5,
    "IQ2_XS": 2.3125,
    "IQ2_XXS": 2.0625,
    "TQ2_0": 2.0625,
    "TQ1_0": 1.6875,
    "IQ1_M": 1.75,
    "IQ1_S": 1.5625,
    # Server-side formats: the weights' bits; group scales only add to them.
    "FP8": 8.0,
    "INT8": 8.0,
    "W8A8": 8.0,
    "INT4": 4.0,
    "W4A16": 4.0,
    "AWQ": 4.0,
    "GPTQ": 4.0,
    "NF4": 4.0,
}
SMALLEST_BITS = min(QUANT_BITS.values())
FLOAT_FORMATS = {"F32", "FP32", "F16", "FP16", "BF16"}
_PRESET = re.compile(r"^(I?Q\d_(?:K|[01]|N?L|X{0,2}S|M))(?:_[A-Z]+)?$")
_MLX = re.compile(r"(\d+(?:\.\d+)?)[-_ ]?bits?\b", re.IGNORECASE)
_BARE = re.compile(r"^I?Q(\d)(?:$|_)")
_BPW = re.compile(r"(\d+(?:\.\d+)?)\s*bpw\b", re.IGNORECASE)


@dataclass(frozen=True)
class Bits:
    bits: float
    label: str
    # True when the format was not stated and the smallest known was assumed.
    assumed: bool = False

    @property
    def quantized(self) -> bool:
        """Quantized weights run prefill on the INT8/FP8 tensor path where a GPU has one."""
        return self.bits < 16


def bits_per_weight(quantization: str, model_id: str = "") -> Bits:
    """Bits per weight for a quantization name (GGUF types and presets, MLX n-bit, EXL2 bpw,
    AWQ/GPTQ, FP8); the model id is read where the quantization is blank."""
    text = (quantization or "").strip() or normalize.parse_model(model_id)["quantization"]
    upper = text.upper().removeprefix("UD-")
    if upper in QUANT_BITS:
        return Bits(QUANT_BITS[upper], upper)
    preset = _PRESET.match(upper)
    if preset and preset.group(1) in QUANT_BITS:
        return Bits(QUANT_BITS[preset.group(1)], upper)
    # MLX stores n-bit weights with an fp16 scale and bias per group of 32-128: +0.25 at least.
    mlx = _MLX.search(text)
    if mlx:
        return Bits(float(mlx.group(1)) + 0.25, text)
    bpw = _BPW.search(text)
    if bpw:
        return Bits(float(bpw.group(1)), text)
    for name, bits in QUANT_BITS.items():
        if re.search(rf"(?:^|[^A-Z0-9]){re.escape(name)}(?:$|[^A-Z0-9])", upper):
            return Bits(bits, name)
    bare = _BARE.match(upper)
    if bare:
        # "Q4" names a family; no member stores fewer bits than its number.
        return Bits(float(bare.group(1)), upper)
    return Bits(SMALLEST_BITS, "quantization not stated", assumed=True)


# Mixture-of-experts models: (id pattern, total B, active B). A pattern applies only when the
# id states no size or a size near the total, so "deepseek-r1:8b" (a dense distill) is not R1.
MOE_MODELS = [
    (r"mixtral.*8x7b", 46.7, 12.9),
    (r"mixtral.*8x22b", 141.0, 39.0),
    # Ollama's qwen3:30b and qwen3-coder:30b are the 30B-A3B MoE too.
    (r"qwen3.*\b235b", 235.0, 22.0),
    (r"qwen3.*\b30b", 30.5, 3.3),
    (r"qwen3-coder.*480b", 480.0, 35.0),
    (r"qwen2.*57b.*a14b", 57.4, 14.2),
    (r"qwen1\.5-moe.*a2\.7b", 14.3, 2.7),
    (r"deepseek-(?:v3|r1)(?!.*distill)", 671.0, 37.0),
    (r"deepseek-(?:coder-)?v2-lite|deepseek-coder-v2:16b", 15.7, 2.4),
    (r"deepseek-(?:coder-)?v2(?!.*lite)", 236.0, 21.0),
    (r"gpt-oss.*\b20b", 20.9, 3.6),
    (r"gpt-oss.*\b120b", 116.8, 5.1),
    (r"llama-?4.*(?:scout|16x17b)", 109.0, 17.0),
    (r"llama-?4.*(?:maverick|128x17b)", 400.0, 17.0),
    (r"phi-3\.5-moe", 41.9, 6.6),
    (r"olmoe.*1b.*7b", 6.9, 1.3),
    (r"granite.*3b-a800m|granite3(?:\.\d)?-moe:3b", 3.3, 0.8),
    (r"granite.*1b-a400m|granite3(?:\.\d)?-moe:1b", 1.3, 0.4),
    (r"glm-4\.[56]-air", 106.0, 12.0),
    (r"glm-4\.[56](?!-air)", 355.0, 32.0),
    (r"minimax-m2", 230.0, 10.0),
    (r"kimi-k2", 1000.0, 32.0),
    (r"dbrx", 132.0, 36.0),
]


def _size_fits(params_b: float | None, total: float, active: float) -> bool:
    """An id's stated size names this model when it is near the total or the active count
    ("llama-4-scout-17b-16e" states the active 17B)."""
    return (
        not params_b
        or abs(params_b - total) <= 0.1 * total
        or abs(params_b - active) <= 0.25 * active
    )


_ACTIVE = re.compile(r"[-_:]a(\d+(?:\.\d+)?)([bm])(?=$|[-_.: ])", re.IGNORECASE)
_EXPERTS = re.compile(r"(?:^|[-_:/ ])(\d+)x(\d+(?:\.\d+)?)b(?=$|[-_.: ])", re.IGNORECASE)


@dataclass(frozen=True)
class Weights:
    total_b: float
    active_b: float
    note: str

    @property
    def is_moe(self) -> bool:
        return self.active_b < self.total_b


def model_weights(
    model_id: str, params_b: float | None, declared_active_b: float | None = None
) -> Weights | None:
    """Total and active parameters (billions), or None when the size is unknown.

    `params_b` comes from the model's name where it has one (the stack's), else from what the
    run declared; `declared_active_b` (an imported row's stated MoE active size) is used only
    when the name says nothing of experts, so a name cannot be outvoted by a claim."""
    name = normalize.normalise_model_id(model_id).lower()
    for pattern, total, active in MOE_MODELS:
        if re.search(pattern, name) and _size_fits(params_b, total, active):
            return Weights(total, active, f"MoE: {active:g}B of {total:g}B params active")
    active_match = _ACTIVE.search(name)
    if active_match and params_b:
        active = float(active_match.group(1)) / (1000 if active_match.group(2) == "m" else 1)
        if 0 < active < params_b:
            return Weights(params_b, active, f"MoE: {active:g}B of {params_b:g}B params active")
    experts = _EXPERTS.search(name)
    if experts and not params_b:
        count, size = int(experts.group(1)), float(experts.group(2))
        # Unknown routing: at least one expert's worth is active.
        return Weights(
            count * size, size, f"MoE {count}x{size:g}B: at least {size:g}B params active"
        )
    if params_b and declared_active_b and 0 < declared_active_b < params_b:
        return Weights(
            params_b,
            declared_active_b,
            f"MoE: {declared_active_b:g}B of {params_b:g}B params active (as declared)",
        )
    if params_b:
        return Weights(params_b, params_b, f"{params_b:g}B params")
    return None


def figure(value: float) -> str:
    """A spec figure as the vendor writes it: 1,008 · 716.8 · 68.25 · 4.5."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:.4g}"


@dataclass(frozen=True)
class Source:
    """What bounds a machine: its accelerator entry and how many of it work together."""

    accelerator: Accelerator
    count: int
    label: str

    @property
    def bandwidth_gbps(self) -> float:
        return self.accelerator.bandwidth_gbps * self.count

    def bandwidth_text(self) -> str:
        each = f"{figure(self.accelerator.bandwidth_gbps)} GB/s"
        if self.count > 1:
            return (
                f"{self.count} × {each} = {figure(self.bandwidth_gbps)} GB/s, summed as if "
                "tensor-parallel"
            )
        return each


@dataclass(frozen=True)
class Ceilings:
    source: Source
    weights: Weights
    bits: Bits
    decode_tps: float
    prefill_tps: float | None
    peak: tuple[float, str] | None

    @property
    def active_gb(self) -> float:
        return self.weights.active_b * self.bits.bits / 8


@dataclass(frozen=True)
class Unknown:
    """Why no ceiling can be computed; `hardware_name` is set when the machine is the reason."""

    reason: str
    hardware_name: str = ""
    hardware_kind: str = ""


GPU_KINDS = ("gpu", "apple")
CPU_KINDS = ("cpu", "apple")


def machine_source(
    catalog: Catalog, *, gpu_model: str, gpu_count: int, vram_gb: float | None, cpu_model: str
) -> Source | Unknown:
    """The accelerator that bounds a machine. A GPU machine is bounded by its GPUs, or by its
    CPU where the CPU's memory is faster (weights may have run there); a machine without a
    GPU by its CPU."""
    cpu = catalog.find(cpu_model, kinds=CPU_KINDS) if cpu_model else None
    if gpu_model:
        gpu = catalog.find(gpu_model, kinds=GPU_KINDS, memory_gb=vram_gb)
        if gpu is None:
            return Unknown(
                f"GPU {gpu_model!r} is not in the accelerator data file",
                hardware_name=gpu_model,
                hardware_kind="gpu",
            )
        count = max(gpu_count, 1) if gpu.kind == "gpu" else 1
        source = Source(gpu, count, f"{count} × {gpu.name}" if count > 1 else gpu.name)
        if cpu and cpu.bandwidth_gbps > source.bandwidth_gbps:
            return Source(cpu, 1, f"{cpu.name} (the CPU's memory is faster than the GPU's)")
        return source
    if not cpu_model:
        return Unknown("the machine names neither a GPU nor a CPU")
    if cpu is None:
        return Unknown(
            f"CPU {cpu_model!r} is not in the accelerator data file",
            hardware_name=cpu_model,
            hardware_kind="cpu",
        )
    return Source(cpu, 1, f"{cpu.name}, one socket" if cpu.kind == "cpu" else cpu.name)


def ceilings(
    catalog: Catalog,
    *,
    gpu_model: str,
    gpu_count: int,
    vram_gb: float | None,
    cpu_model: str,
    model_id: str,
    params_b: float | None,
    quantization: str,
    declared_active_b: float | None = None,
) -> Ceilings | Unknown:
    """Decode and prefill ceilings for a stack on a machine, or why none is known."""
    source = machine_source(
        catalog, gpu_model=gpu_model, gpu_count=gpu_count, vram_gb=vram_gb, cpu_model=cpu_model
    )
    if isinstance(source, Unknown):
        return source
    weights = model_weights(model_id, params_b, declared_active_b)
    if weights is None:
        return Unknown(
            f"the parameter count of {normalize.normalise_model_id(model_id)!r} is unknown"
        )
    bits = bits_per_weight(quantization, model_id)
    active_gb = weights.active_b * bits.bits / 8
    peak = source.accelerator.peak_tops(integer_weights=bits.quantized)
    prefill = None
    if peak:
        prefill = peak[0] * source.count * 1e12 / (2 * weights.active_b * 1e9)
    return Ceilings(
        source=source,
        weights=weights,
        bits=bits,
        decode_tps=source.bandwidth_gbps / active_gb,
        prefill_tps=prefill,
        peak=peak,
    )
