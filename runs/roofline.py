"""Physical ceilings on a run's speed: bytes read per decoded token and FLOPs per prefilled token.

Decoding one token reads every active weight once, so decode tok/s cannot beat memory bandwidth
÷ active weight bytes; prefilling one token costs 2 FLOPs per active parameter, so prefill tok/s
cannot beat peak throughput ÷ (2 × active parameters). Each input is taken at the end that
makes the ceiling higher (the fewest bits a format stores, the fastest variant of a product),
so a genuine run stays under it. No Django here.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runs import model_sizes, normalize
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
# What the named GGUF presets hold in real files, output and embedding tensors included: the
# file size ÷ parameters of llama.cpp's reference quantizations (tools/quantize, Llama-3-8B:
# Q4_K_M 4.58 GiB for 8.03B = 4.90 bits), taken a little under, since a larger model's share
# of output and embedding tensors is smaller (Llama-3.1-70B Q4_K_M: 4.82).
TYPICAL_BITS = {
    "Q8_0": 8.5,
    "Q6_K": 6.56,
    "Q5_K_M": 5.65,
    "Q5_K_S": 5.5,
    "Q5_1": 6.05,
    "Q5_0": 5.55,
    "Q4_K_M": 4.85,
    "Q4_K_S": 4.6,
    "Q4_1": 5.05,
    "Q4_0": 4.55,
    "Q3_K_L": 4.2,
    "Q3_K_M": 3.9,
    "Q3_K_S": 3.55,
    "Q2_K": 2.95,
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
    AWQ/GPTQ, FP8); the model id is read where the quantization is blank, or where it names
    a float type beside an id that names a quantized format: that float is the engine's compute
    type (vLLM's --dtype float16 serving "Qwen3.6-27B-int4-AutoRound"), not the weights'."""
    text = (quantization or "").strip()
    named = normalize.parse_model(model_id)["quantization"] if model_id else ""
    if not text or text.upper() in FLOAT_FORMATS and named and named not in FLOAT_FORMATS:
        text = named
    upper = text.upper().removeprefix("UD-")
    if upper in TYPICAL_BITS:
        return Bits(TYPICAL_BITS[upper], f"{upper}, as real files hold it")
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
    (r"qwen3-next.*80b", 79.7, 3.0),
    # Qwen3.5/3.6-35B-A3B and Gemma 4 26B-A4B, as their publishers name them (Ollama drops
    # the suffix: "qwen3.6:35b", "gemma4:26b").
    (r"qwen3\.[56].*\b35b", 35.0, 3.0),
    (r"gemma-?4.*\b26b", 26.0, 4.0),
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


# No mixture of experts has fewer of its parameters active than this (Kimi K2: 32B of 1T; Qwen3-
# Next: 3B of 80B); an MoE whose active count nobody states is bounded by it.
MIN_ACTIVE_SHARE = 0.03
# Model lines whose publishers name an MoE by its active size ("Qwen3.6-35B-A3B", "LFM2-8B-A1B",
# "Nemotron-3-Nano-30B-A3B", "gemma-4-26B-A4B", "granite-3.1-3b-a800m"): for these the registry
# reads the suffix. Anywhere else "-a1b" is only a name, and a name never raises a ceiling.
MOE_NAMING = re.compile(
    r"qwen|lfm2|nemotron|gemma-?4|granite|ernie|hunyuan|\bling-|moonlight|kimi|olmoe",
    re.IGNORECASE,
)
_ACTIVE = re.compile(r"[-_:]a(\d+(?:\.\d+)?)([bm])(?=$|[-_.: ])", re.IGNORECASE)
# Gemma 3n and Gemma 4 "E2B"/"E4B" models keep their per-layer embeddings out of the weights a
# token reads: the name's effective size is what decode reads (the E4B holds about 8B).
EFFECTIVE_NAMING = re.compile(r"gemma-?(?:3n|4)", re.IGNORECASE)
_EFFECTIVE = re.compile(r"[-_:]e(\d+(?:\.\d+)?)b(?=$|[-_.: ])", re.IGNORECASE)


@dataclass(frozen=True)
class Weights:
    total_b: float
    active_b: float
    note: str
    # False for an MoE whose active parameters are unknown (active_b is then the floor).
    active_known: bool = True

    @property
    def is_moe(self) -> bool:
        return self.active_b < self.total_b


def model_weights(
    model_id: str,
    params_b: float | None,
    declared_active_b: float | None = None,
    *,
    moe: bool = False,
    params_source: str = "",
    known: model_sizes.KnownModel | None = None,
) -> Weights | None:
    """Total and active parameters (billions), or None when the size is unknown.

    `params_b` is the run's own count (its metadata, an imported row's statement) or, for a
    model the registry does not know, its name's; the mixture-of-experts table wins where it
    names the model, then the registry's entry (`known`, model_sizes) where it gives the
    parameters a token reads. A name never makes a model an MoE by itself ("-a1b" is only a
    name, and a model the registry knows as dense stays dense): `declared_active_b`,
    `moe` (what the run's metadata says) or a line in MOE_NAMING does, and an MoE without an
    active count is bounded by MIN_ACTIVE_SHARE with the note "active parameters unknown"."""
    name = normalize.normalise_model_id(model_id).lower()
    for pattern, total, active in MOE_MODELS:
        if re.search(pattern, name) and _size_fits(params_b, total, active):
            return Weights(total, active, f"MoE: {active:g}B of {total:g}B params active")
    if known and known.active_b and _size_fits(params_b, known.params_b, known.active_b):
        return Weights(
            known.params_b,
            known.active_b,
            f"{known.active_b:g}B of {known.params_b:g}B params read per token ({known.source})",
        )
    if not params_b:
        return None
    where = f" ({params_source})" if params_source else ""
    if declared_active_b and 0 < declared_active_b < params_b:
        return Weights(
            params_b,
            declared_active_b,
            f"MoE: {declared_active_b:g}B of {params_b:g}B params active (as declared)",
        )
    suffix = _ACTIVE.search(name)
    if suffix and known is None and MOE_NAMING.search(name):
        active = float(suffix.group(1)) / (1000 if suffix.group(2).lower() == "m" else 1)
        if 0 < active < params_b:
            return Weights(
                params_b,
                active,
                f"MoE: {active:g}B of {params_b:g}B params active (model registry: this line "
                "names its MoE models by their active size)",
            )
    effective = _EFFECTIVE.search(name)
    if effective and EFFECTIVE_NAMING.search(name) and 0 < float(effective.group(1)) < params_b:
        size = float(effective.group(1))
        return Weights(
            params_b, size, f"{size:g}B of {params_b:g}B params read per token (effective size)"
        )
    if moe:
        floor = round(params_b * MIN_ACTIVE_SHARE, 3)
        return Weights(
            params_b,
            floor,
            f"MoE of {params_b:g}B params{where}, active parameters unknown: bounded at the "
            f"sparsest known MoE's {MIN_ACTIVE_SHARE:.0%} = {floor:g}B",
            active_known=False,
        )
    return Weights(params_b, params_b, f"{params_b:g}B params{where}")


def figure(value: float) -> str:
    """A spec figure as the vendor writes it: 1,008 · 716.8 · 68.25 · 4.5."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:.4g}"


# How multiple GPUs share a model. A layer (pipeline) split gives each card a run of layers:
# one token reads them card after card, so decode sees one card's bandwidth. A tensor-parallel
# split gives every card a slice of every matrix: the cards read at once and bandwidth sums.
LAYER, TENSOR, UNKNOWN_SPLIT = "layer", "tensor", ""
_SPLIT_WORDS = {
    "layer": LAYER,
    "layers": LAYER,
    "pipeline": LAYER,
    "pp": LAYER,
    "none": LAYER,
    "row": TENSOR,
    "tensor": TENSOR,
    "tp": TENSOR,
    "graph": TENSOR,
}
# Engines whose multi-GPU default is known: llama.cpp's --split-mode is layer; vLLM and SGLang
# use one GPU unless a tensor-parallel size is given.
LAYER_SPLIT_ENGINES = ("llama.cpp", "ollama", "lm studio", "lmstudio", "llamafile", "koboldcpp")
ONE_GPU_ENGINES = ("vllm", "sglang")


def split_mode(settings: Mapping[str, Any] | None, engine: str) -> tuple[str, str]:
    """(LAYER, TENSOR or UNKNOWN_SPLIT, why) for a multi-GPU run from its launch settings
    (split_mode, tensor_parallel) or its engine's default."""
    settings = settings or {}
    tp = settings.get("tensor_parallel")
    if isinstance(tp, int) and not isinstance(tp, bool) and tp > 1:
        return TENSOR, f"tensor parallel {tp} declared"
    said = str(settings.get("split_mode") or "").strip().lower()
    if said in _SPLIT_WORDS:
        return _SPLIT_WORDS[said], f"split mode {said}"
    name = (engine or "").strip().lower()
    if name.startswith(LAYER_SPLIT_ENGINES):
        return LAYER, f"{engine}'s default layer split"
    if name.startswith(ONE_GPU_ENGINES) and isinstance(tp, int) and tp <= 1:
        return LAYER, f"tensor parallel {tp}"
    return UNKNOWN_SPLIT, "split mode unknown"


@dataclass(frozen=True)
class Source:
    """What bounds a machine: its accelerator entry, how many of it work together, and how
    a multi-GPU run splits the model (`split`: LAYER, TENSOR or UNKNOWN_SPLIT)."""

    accelerator: Accelerator
    count: int
    label: str
    split: str = TENSOR
    split_note: str = ""

    @property
    def bandwidth_gbps(self) -> float:
        """The bandwidth one decoded token sees: the sum only for a tensor-parallel split (an
        unknown split is not trusted to sum)."""
        summed = self.count > 1 and self.split == TENSOR
        return self.accelerator.bandwidth_gbps * (self.count if summed else 1)

    def bandwidth_text(self) -> str:
        each = f"{figure(self.accelerator.bandwidth_gbps)} GB/s"
        if self.count <= 1:
            return each
        if self.split == TENSOR:
            return (
                f"{self.count} × {each} = {figure(self.bandwidth_gbps)} GB/s, summed "
                f"({self.split_note})"
            )
        return f"{each}, one card's: {self.split_note}"


@dataclass(frozen=True)
class RunFacts:
    """What a run reports of itself beyond its name: its bundle's model block (the server's
    parameter count, the weights file's size), an imported row's statements, its launch."""

    params_b: float | None = None
    params_source: str = ""
    active_b: float | None = None
    moe: bool = False
    weights_bytes: int | None = None
    split: str = TENSOR
    split_note: str = "as if tensor-parallel"
    # Bits per KV-cache element (the cache type's), for the KV read at depth.
    kv_bits: float = 16.0


@dataclass(frozen=True)
class Ceilings:
    source: Source
    weights: Weights
    bits: Bits
    decode_tps: float
    prefill_tps: float | None
    peak: tuple[float, str] | None
    # The weights file's size where the run reported it (bytes per token then come from it).
    weights_bytes: int | None = None
    # KV-cache bytes per token of context (None: the model's shape is not in the registry).
    kv_bytes_per_token: float | None = None

    @property
    def active_gb(self) -> float:
        if self.weights_bytes:
            return self.weights_bytes / 1e9 * self.weights.active_b / self.weights.total_b
        return self.weights.active_b * self.bits.bits / 8

    def decode_at_depth(self, depth: int) -> float:
        """The decode ceiling with `depth` tokens in context: each token also reads their KV."""
        kv_gb = depth * (self.kv_bytes_per_token or 0) / 1e9
        return self.source.bandwidth_gbps / (self.active_gb + kv_gb)

    def ttft_floor_ms(self, prompt_tokens: int) -> float | None:
        """The least time a prompt of `prompt_tokens` can take to prefill."""
        if not self.prefill_tps or prompt_tokens <= 0:
            return None
        return prompt_tokens / self.prefill_tps * 1000


@dataclass(frozen=True)
class Unknown:
    """Why no ceiling can be computed; `hardware_name` is set when the machine is the reason."""

    reason: str
    hardware_name: str = ""
    hardware_kind: str = ""


GPU_KINDS = ("gpu", "apple")
CPU_KINDS = ("cpu", "apple")


def machine_source(
    catalog: Catalog,
    *,
    gpu_model: str,
    gpu_count: int,
    vram_gb: float | None,
    cpu_model: str,
    split: str = TENSOR,
    split_note: str = "",
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
        label = f"{count} × {gpu.name}" if count > 1 else gpu.name
        source = Source(gpu, count, label, split, split_note)
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
    facts: RunFacts | None = None,
    params_source: str = "",
) -> Ceilings | Unknown:
    """Decode and prefill ceilings for a stack on a machine, or why none is known.

    Parameters come from the run's facts (its metadata), else the model registry, else
    `params_b` (what the name or an imported row states); bytes per token from the weights
    file's size where the run reported it, else the format's typical bits per weight."""
    facts = facts or RunFacts()
    source = machine_source(
        catalog,
        gpu_model=gpu_model,
        gpu_count=gpu_count,
        vram_gb=vram_gb,
        cpu_model=cpu_model,
        split=facts.split,
        split_note=facts.split_note,
    )
    if isinstance(source, Unknown):
        return source
    known = model_sizes.known_model(model_id)
    size, size_source = facts.params_b, facts.params_source
    if not size and known:
        size, size_source = known.params_b, known.source
    if not size:
        size, size_source = params_b, params_source
    weights = model_weights(
        model_id,
        size,
        facts.active_b or declared_active_b,
        moe=facts.moe,
        params_source=size_source,
        known=known,
    )
    if weights is None:
        return Unknown(
            f"the parameter count of {normalize.normalise_model_id(model_id)!r} is unknown"
        )
    bits = bits_per_weight(quantization, model_id)
    file_bytes = facts.weights_bytes
    # A file smaller than its format's floor for these parameters is not this model's file.
    floor = weights.total_b * 1e9 * _floor_bits(bits) / 8
    if file_bytes and file_bytes < floor:
        file_bytes = None
    kv = None
    if known and known.kv_bytes_per_token and not weights.is_moe:
        kv = known.kv_bytes_per_token * facts.kv_bits / 16
    peak = source.accelerator.peak_tops(integer_weights=bits.quantized)
    prefill = None
    if peak:
        compute_count = source.count if source.accelerator.kind == "gpu" else 1
        prefill = peak[0] * compute_count * 1e12 / (2 * weights.active_b * 1e9)
    found = Ceilings(
        source=source,
        weights=weights,
        bits=bits,
        decode_tps=0.0,
        prefill_tps=prefill,
        peak=peak,
        weights_bytes=file_bytes,
        kv_bytes_per_token=kv,
    )
    return dataclasses.replace(found, decode_tps=source.bandwidth_gbps / found.active_gb)


def _floor_bits(bits: Bits) -> float:
    """The fewest bits the format can store (its base type's), whatever the preset."""
    base = _PRESET.match(bits.label.split(",")[0])
    if base and base.group(1) in QUANT_BITS:
        return QUANT_BITS[base.group(1)]
    return min(bits.bits, QUANT_BITS.get(bits.label.split(",")[0], bits.bits))
