"""Normalise free-text hardware and model names into stable identities (no Django imports)."""

from __future__ import annotations

import hashlib
import json
import re

_TRADEMARKS = re.compile(r"\((?:r|tm|c)\)|™|®", re.IGNORECASE)
_GPU_NOISE = re.compile(
    r"\b(?:nvidia|geforce|amd|ati|radeon|corporation|graphics|integrated gpu|gpu|hbm\d?e?)\b",
    re.IGNORECASE,
)
_MEMORY_SUFFIX = re.compile(r"\b\d+(?:\.\d+)?\s*gb\b", re.IGNORECASE)
_CPU_NOISE = re.compile(
    r"\b(?:cpu|processor|\d+-core|with radeon graphics)\b|@\s*[\d.]+\s*ghz", re.IGNORECASE
)
_SPACES = re.compile(r"\s+")

# Keep this list short and explicit: a wrong vendor guess would put a card in the wrong filter.
_VENDOR_PATTERNS = [
    ("apple", re.compile(r"\bapple\b|\bm[1-9](?:\s|$|\s?(?:pro|max|ultra))", re.IGNORECASE)),
    # No bare "AMD"/"Intel": those words name CPUs far more often than GPUs.
    ("amd", re.compile(r"radeon|instinct|\brx\s?\d{3,4}|\bmi\d{2,3}", re.IGNORECASE)),
    ("intel", re.compile(r"\barc\b|\biris\b|intel.*graphics", re.IGNORECASE)),
    (
        "nvidia",
        re.compile(r"nvidia|geforce|\b(?:rtx|gtx|tesla|quadro|titan)\b|\b[ahlbv]\d{2,3}\b", re.I),
    ),
]
ACCELERATOR_FOR_VENDOR = {"nvidia": "cuda", "amd": "rocm", "apple": "metal", "intel": "sycl"}

# Upper bounds (GB) of the VRAM buckets the leaderboard filters on.
VRAM_BUCKETS = [(8, "8"), (12, "12"), (16, "16"), (24, "24"), (32, "32"), (48, "48")]
VRAM_BUCKET_TOP = "80+"
RAM_BUCKETS = [(8, "8"), (16, "16"), (32, "32"), (64, "64"), (128, "128")]
RAM_BUCKET_TOP = "256+"
PARAM_BUCKETS = [(3, "<=3B"), (9, "3-9B"), (20, "9-20B"), (40, "20-40B"), (80, "40-80B")]
PARAM_BUCKET_TOP = "80B+"


def _clean(text: str) -> str:
    return _SPACES.sub(" ", _TRADEMARKS.sub(" ", text or "")).strip()


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def gpu_vendor(name: str) -> str:
    for vendor, pattern in _VENDOR_PATTERNS:
        if pattern.search(name or ""):
            return vendor
    return ""


def canonical_gpu(name: str) -> str:
    """Display name with vendor marketing stripped: 'NVIDIA GeForce RTX 4090' -> 'RTX 4090'."""
    text = _clean(name)
    text = _MEMORY_SUFFIX.sub(" ", text)
    text = _GPU_NOISE.sub(" ", text)
    text = _SPACES.sub(" ", text).strip(" -,")
    if not text:
        return ""
    words = text.split(" ")
    return " ".join(
        w.upper()
        if re.fullmatch(r"[a-z]{1,4}\d*|[a-z]*\d+[a-z]*", w) and len(w) <= 5 and not w[0].isupper()
        else w
        for w in words
    )


def canonical_cpu(name: str) -> str:
    text = _CPU_NOISE.sub(" ", _clean(name))
    return _SPACES.sub(" ", text).strip(" -,")


def bucket(value: float | None, bounds: list[tuple[float, str]], top: str) -> str:
    if value is None or value <= 0:
        return ""
    for upper, label in bounds:
        if value <= upper + 1e-9:
            return label
    return top


def vram_bucket(vram_gb: float | None) -> str:
    return bucket(vram_gb, VRAM_BUCKETS, VRAM_BUCKET_TOP)


def ram_bucket(ram_gb: float | None) -> str:
    return bucket(ram_gb, RAM_BUCKETS, RAM_BUCKET_TOP)


def param_bucket(params_b: float | None) -> str:
    return bucket(params_b, PARAM_BUCKETS, PARAM_BUCKET_TOP)


def hardware_identity(
    *, cpu: str, gpu: str, gpu_count: int, vram_gb: float | None, ram_gb: float | None, os_name: str
) -> dict:
    """Every normalised field of a hardware identity, plus its canonical key."""
    gpu_name = canonical_gpu(gpu)
    cpu_name = canonical_cpu(cpu)
    vendor = gpu_vendor(gpu) or (gpu_vendor(cpu) if "apple" in (cpu or "").lower() else "")
    if vendor == "apple" and not gpu_name:
        gpu_name = canonical_cpu(cpu)
    count = max(gpu_count, 1) if gpu_name else 0
    vram = round(float(vram_gb), 1) if vram_gb else None
    ram = float(round(ram_gb)) if ram_gb else None
    identity = {
        "cpu_model": cpu_name,
        "gpu_model": gpu_name,
        "gpu_vendor": vendor,
        "gpu_count": count,
        "vram_gb": vram,
        "ram_gb": ram,
        "os": _os_family(os_name),
        "accelerator": ACCELERATOR_FOR_VENDOR.get(vendor, "cpu") if gpu_name else "cpu",
    }
    key_parts = [
        slug(identity["gpu_model"]) or "no-gpu",
        str(count),
        f"{vram:g}" if vram else "-",
        slug(cpu_name) or "-",
        f"{ram:g}" if ram else "-",
        identity["os"] or "-",
        identity["accelerator"],
    ]
    identity["canonical_key"] = "|".join(key_parts)[:255]
    identity["vram_bucket"] = vram_bucket(vram)
    identity["ram_bucket"] = ram_bucket(ram)
    return identity


def _os_family(os_name: str) -> str:
    text = (os_name or "").lower()
    if text.startswith(("darwin", "mac")):
        return "macos"
    if text.startswith("win"):
        return "windows"
    if text.startswith("linux"):
        return "linux"
    return slug(text)


_QUANT = re.compile(
    r"(?:^|[-_.:/ ])((?:i?q)\d(?:_[a-z0-9]+)*|bf16|fp16|f16|fp8|f32|int[48]|awq|gptq|mlx-\d+bit)"
    r"(?=$|[-_.: ])",
    re.IGNORECASE,
)
_PARAMS = re.compile(r"(?:^|[-_:/ ])(\d+(?:\.\d+)?)\s*([bm])(?=$|[-_.: ]|\b)", re.IGNORECASE)
_FAMILY = re.compile(r"^([a-z]+[0-9.]*[a-z]?)")


def normalise_model_id(model_id: str) -> str:
    """Display id: a .gguf path is reduced to its file stem; Ollama's ':latest' is dropped."""
    text = (model_id or "").strip()
    if text.lower().endswith(".gguf"):
        text = re.split(r"[\\/]", text)[-1][: -len(".gguf")]
    if text.lower().endswith(":latest"):
        text = text[: -len(":latest")]
    return text


def parse_model(model_id: str) -> dict:
    """Family, parameter count (billions) and quantization guessed from a model id."""
    norm = normalise_model_id(model_id)
    name = norm.rsplit("/", 1)[-1].lower()
    quant_match = _QUANT.search(name)
    params_match = _PARAMS.search(name)
    params_b = None
    if params_match:
        params_b = float(params_match.group(1)) / (
            1000 if params_match.group(2).lower() == "m" else 1
        )
    family_match = _FAMILY.match(name)
    return {
        "model_id": norm,
        "family": family_match.group(1).rstrip(".") if family_match else "",
        "params_b": params_b,
        "quantization": normalise_quant(quant_match.group(1)) if quant_match else "",
    }


def normalise_quant(quant: str) -> str:
    text = (quant or "").strip()
    return text.upper() if not text.lower().startswith("mlx") else text.lower()


def engine_from_provider(provider: str) -> str:
    text = (provider or "").lower()
    if text in ("llama-server", "llama.cpp", "llamacpp", "llama_cpp"):
        return "llama.cpp"
    if text.startswith("ollama"):
        return "ollama"
    if text in ("openai", "openai_compat", "openai-compatible", ""):
        return "openai-compatible"
    return slug(text)


def canonical_hash(data: object) -> str:
    """sha256 of canonical JSON: sorted keys, compact separators, non-ASCII kept."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def stack_identity(
    *,
    model_id: str,
    quantization: str,
    model_sha256: str,
    engine: str,
    harness: str,
    context_length: int | None,
    kv_cache_type: str,
    draft_model: str,
    launch_settings: dict | None,
) -> str:
    """The comparability key: runs with the same key measured the same thing."""
    return canonical_hash(
        {
            "model": normalise_model_id(model_id).lower(),
            "quant": normalise_quant(quantization),
            "sha256": (model_sha256 or "").lower(),
            "engine": engine,
            "harness": harness,
            "ctx": context_length,
            "kv": kv_cache_type.lower(),
            "draft": normalise_model_id(draft_model).lower(),
            "launch_settings": launch_settings or {},
        }
    )
