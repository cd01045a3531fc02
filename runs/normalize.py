"""Normalise free-text hardware and model names into stable identities (no Django imports)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from runs.methods import DEFAULT_METHOD


class MachineDescription(TypedDict):
    """A machine as a run describes it: hardware_identity's arguments."""

    cpu: str
    gpu: str
    gpu_count: int
    vram_gb: float | None
    ram_gb: float | None
    os_name: str
    memory_channels: NotRequired[int | None]
    vendor: NotRequired[str]


class StackDescription(TypedDict):
    """A stack as a run describes it: stack_identity's arguments."""

    model_id: str
    quantization: str
    model_sha256: str
    engine: str
    harness: str
    context_length: int | None
    kv_cache_type: str
    draft_model: str
    launch_settings: Mapping[str, Any] | None
    method: NotRequired[str]


class HardwareIdentity(TypedDict):
    """A normalised machine: Hardware's fields and its canonical key (hardware_identity)."""

    cpu_model: str
    gpu_model: str
    gpu_vendor: str
    gpu_count: int
    vram_gb: float | None
    ram_gb: float | None
    memory_channels: int | None
    os: str
    accelerator: str
    canonical_key: str
    vram_bucket: str
    ram_bucket: str


class HardwareClassFields(TypedDict):
    """A hardware class as HardwareClass stores it (hardware_class_of and friends)."""

    kind: str
    key: str
    slug: str
    label: str
    vendor: str
    chip: str
    count: int
    memory_gb: float | None
    memory_channels: int | None


class ParsedModel(TypedDict):
    """What a model id says of itself (parse_model)."""

    model_id: str
    family: str
    params_b: float | None
    quantization: str


_TRADEMARKS = re.compile(r"\((?:r|tm|c)\)|™|®", re.IGNORECASE)
_GPU_NOISE = re.compile(
    r"\b(?:nvidia|geforce|amd|ati|radeon|corporation|graphics|integrated gpu|gpu|hbm\d?e?)\b",
    re.IGNORECASE,
)
_MEMORY_SUFFIX = re.compile(r"\b\d+(?:\.\d+)?\s*gb\b", re.IGNORECASE)
_CPU_NOISE = re.compile(
    r"\b(?:cpu|processor|\d+-core|\d+(?:st|nd|rd|th) gen)\b|@\s*[\d.]+\s*ghz"
    r"|(?:\bwith|\sw/)\s+radeon(?:\s+\w*\d\w*)?(?:\s+graphics)?\b",
    re.IGNORECASE,
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
# Model-size tiers, by total parameters (what has to fit in memory), named as people shop:
# (upper bound in billions, stored key, label). The bounds fall between the sizes models come
# in (3.8B and 4B, 7B to 9B, 12B to 14B, 24B to 32B, 70B and more).
PARAM_TIERS = [
    (5.0, "to-4b", "up to 4B"),
    (10.5, "7-9b", "7–9B"),
    (20.0, "12-15b", "12–15B"),
    (40.0, "24-35b", "24–35B"),
    (65.0, "40-65b", "40–65B"),
]
PARAM_TIER_TOP = ("70b-up", "70B and up")
PARAM_BUCKETS = [(upper, key) for upper, key, _label in PARAM_TIERS]
PARAM_BUCKET_TOP = PARAM_TIER_TOP[0]
PARAM_LABELS = {key: label for _upper, key, label in PARAM_TIERS} | dict([PARAM_TIER_TOP])


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


def bucket(value: float | None, bounds: Sequence[tuple[float, str]], top: str) -> str:
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


# Words that only a CPU's name has: a name with one is a CPU even when it mentions integrated
# graphics ("AMD Ryzen 7 7840U w/ Radeon 780M Graphics"), and never becomes a GPU.
_CPU_WORDS = re.compile(
    r"\b(?:epyc|xeon|ryzen|threadripper|opteron|athlon|celeron|pentium|core\s?(?:i[3579]|ultra)"
    r"|processor|cpu|ram|neoverse|graviton|altra|snapdragon)\b|\bi[3579]-\d{4,5}",
    re.IGNORECASE,
)
_SYSTEM_MEMORY = re.compile(r"\b\d+(?:\.\d+)?\s*gb\b|\bram\b", re.IGNORECASE)
_GPU_LIST = re.compile(r"\s*(?:,|\s\+\s)\s*")


def looks_like_cpu(name: str) -> bool:
    """Whether a name (a GPU field, a machine label) describes a CPU, not a GPU."""
    text = _clean(name)
    if not text or gpu_vendor(text) == "apple":
        return False
    return bool(_CPU_WORDS.search(text))


def _gpu_names(gpu: str) -> list[str]:
    """The canonical names in a GPU field, which may list several ('RTX 3090, RTX 3090')."""
    return [name for name in (canonical_gpu(part) for part in _GPU_LIST.split(gpu or "")) if name]


def hardware_identity(
    *,
    cpu: str,
    gpu: str,
    gpu_count: int,
    vram_gb: float | None,
    ram_gb: float | None,
    os_name: str,
    memory_channels: int | None = None,
    vendor: str = "",
) -> HardwareIdentity:
    """Every normalised field of a hardware identity, plus its canonical key.

    `gpu` may list several cards ("A, B", as the v3 CLI writes them); `vram_gb` is all cards'
    memory together. A CPU's name in `gpu` (an old CLI's machine label) is not a GPU: the
    machine is CPU-only. `vendor` is the GPU vendor where the name alone does not say it (a
    stored row whose marketing prefix was stripped: "L4").
    """
    if looks_like_cpu(gpu):
        cpu = cpu or _SPACES.sub(" ", _SYSTEM_MEMORY.sub(" ", _clean(gpu))).strip()
        gpu = ""
    names = _gpu_names(gpu)
    cpu_name = canonical_cpu(cpu)
    vendor = gpu_vendor(gpu) or (vendor if names else "")
    vendor = vendor or (gpu_vendor(cpu) if "apple" in (cpu or "").lower() else "")
    if len(set(names)) == 1:
        gpu_name, count = names[0], max(gpu_count, len(names), 1)
    else:
        gpu_name, count = " + ".join(names), len(names)
    if vendor == "apple":
        gpu_name, count = _apple_chip(gpu_name or cpu_name), 1
    if not gpu_name:
        count = 0
    vram = round(float(vram_gb), 1) if vram_gb else None
    ram = float(round(ram_gb)) if ram_gb else None
    channels = int(memory_channels) if memory_channels else None
    os_family = _os_family(os_name)
    accelerator = ACCELERATOR_FOR_VENDOR.get(vendor, "cpu") if gpu_name else "cpu"
    key_parts = [
        slug(gpu_name) or "no-gpu",
        str(count),
        f"{vram:g}" if vram else "-",
        slug(cpu_name) or "-",
        f"{ram:g}" if ram else "-",
        os_family or "-",
        accelerator,
    ]
    if channels:  # only where known, so that machines recorded without it keep their key
        key_parts.append(f"ch{channels}")
    return HardwareIdentity(
        cpu_model=cpu_name,
        gpu_model=gpu_name,
        gpu_vendor=vendor,
        gpu_count=count,
        vram_gb=vram,
        ram_gb=ram,
        memory_channels=channels,
        os=os_family,
        accelerator=accelerator,
        canonical_key="|".join(key_parts)[:255],
        vram_bucket=vram_bucket(vram),
        ram_bucket=ram_bucket(ram),
    )


# Sizes memory is sold in: a reported size is rounded up to the next one (NVML and the OS
# report a little less than the card or the DIMMs hold: 23.99 GiB, 503.7 GiB), so one card
# model with one memory size is one class.
NOMINAL_VRAM_GB = (
    2,
    3,
    4,
    6,
    8,
    10,
    11,
    12,
    16,
    20,
    24,
    32,
    40,
    48,
    64,
    80,
    94,
    96,
    128,
    141,
    144,
    180,
    192,
    256,
    288,
)
NOMINAL_MEMORY_GB = (
    4,
    8,
    12,
    16,
    18,
    24,
    32,
    36,
    48,
    64,
    96,
    128,
    192,
    256,
    384,
    512,
    768,
    1024,
    1536,
    2048,
    3072,
    4096,
    6144,
    8192,
)
_NOMINAL_SLACK = 1.03


def nominal_gb(value: float | None, sizes: tuple[int, ...]) -> float | None:
    """The memory size a reported size stands for: the smallest listed size it does not exceed
    (by more than a rounding slack); beyond the list, the value rounded."""
    if not value or value <= 0:
        return None
    for size in sizes:
        if value <= size * _NOMINAL_SLACK:
            return float(size)
    return float(round(value))


UNSIZED = " · memory not reported"


def unsized_label(label: str) -> str:
    """A GPU or Apple class without its memory size says so: never a peer of the sized ones
    (runs.identities.ensure_class first joins it to the one sized class where there is one)."""
    return label if label.endswith(UNSIZED) else f"{label}{UNSIZED}"


def _class_slug(*parts: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", " ".join(parts).lower()).strip("-")[:120]


def hardware_class_of(machine: Mapping[str, Any]) -> HardwareClassFields:
    """The hardware class a normalised machine belongs to: HardwareClass's fields.

    `machine` holds hardware_identity's fields (a stored Hardware row's values will do):
    gpu_model, gpu_vendor, gpu_count, vram_gb (all cards), cpu_model, ram_gb, memory_channels.
    A GPU model with its count and memory per card; an Apple chip with its unified memory; a
    CPU-only machine by CPU, RAM and memory channels (where known).
    """
    gpu, vendor = machine.get("gpu_model") or "", machine.get("gpu_vendor") or ""
    count = int(machine.get("gpu_count") or 0)
    if vendor == "apple":
        chip = gpu or _apple_chip(machine.get("cpu_model") or "")
        memory = nominal_gb(machine.get("ram_gb") or machine.get("vram_gb"), NOMINAL_MEMORY_GB)
        return _hw_class(
            kind="apple",
            key=f"apple|{slug(chip)}|{memory or 0:g}",
            slug=_class_slug(chip, f"{memory:g}gb" if memory else ""),
            label=f"{chip} {memory:g} GB" if memory else unsized_label(chip),
            vendor=vendor,
            chip=chip,
            memory_gb=memory,
        )
    if gpu:
        count = max(count, 1)
        total = machine.get("vram_gb")
        mixed = " + " in gpu
        # Mixed cards have no one size per card: their class names the total.
        per_card = nominal_gb(total / (1 if mixed else count), NOMINAL_VRAM_GB) if total else None
        memory = (per_card if mixed else per_card * count) if per_card else None
        times = f"{count}× " if count > 1 and not mixed else ""
        size = (f" · {per_card:g} GB" if mixed else f" {per_card:g} GB") if per_card else UNSIZED
        return _hw_class(
            kind="gpu",
            key=f"gpu|{slug(gpu)}|{count}|{per_card or 0:g}",
            slug=_class_slug(
                f"{count}x" if times else "", gpu, f"{per_card:g}gb" if per_card else ""
            ),
            label=f"{times}{gpu}{size}",
            vendor=vendor,
            chip=gpu,
            count=count,
            memory_gb=memory,
        )
    cpu = machine.get("cpu_model") or ""
    memory = nominal_gb(machine.get("ram_gb"), NOMINAL_MEMORY_GB)
    channels = machine.get("memory_channels") or None
    details = [
        f"{memory:g} GB" if memory else "",
        f"{channels} memory channels" if channels else "",
    ]
    return _hw_class(
        kind="cpu",
        key=f"cpu|{slug(cpu) or '-'}|{memory or 0:g}|{channels or 0}",
        slug=_class_slug(
            "cpu",
            cpu or "unknown",
            f"{memory:g}gb" if memory else "",
            f"{channels}ch" if channels else "",
        ),
        label=" · ".join([f"CPU only: {cpu or 'unknown CPU'}", *filter(None, details)]),
        chip=cpu,
        count=0,
        memory_gb=memory,
        memory_channels=channels,
    )


def _hw_class(
    *,
    kind: str,
    key: str,
    slug: str,
    label: str,
    vendor: str = "",
    chip: str = "",
    count: int = 1,
    memory_gb: float | None = None,
    memory_channels: int | None = None,
) -> HardwareClassFields:
    # Cut to HardwareClass's columns: a long CPU name must not make a run unstorable.
    return HardwareClassFields(
        kind=kind,
        key=key[:255],
        slug=slug,
        label=label[:200],
        vendor=vendor,
        chip=chip[:200],
        count=count,
        memory_gb=memory_gb,
        memory_channels=memory_channels,
    )


def hardware_class(
    *,
    cpu: str,
    gpu: str,
    gpu_count: int,
    vram_gb: float | None,
    ram_gb: float | None,
    os_name: str,
    memory_channels: int | None = None,
    vendor: str = "",
) -> HardwareClassFields:
    """The hardware class of a machine described as hardware_identity takes it."""
    return hardware_class_of(
        hardware_identity(
            cpu=cpu,
            gpu=gpu,
            gpu_count=gpu_count,
            vram_gb=vram_gb,
            ram_gb=ram_gb,
            os_name=os_name,
            memory_channels=memory_channels,
            vendor=vendor,
        )
    )


def remote_class(provider: str) -> HardwareClassFields:
    """The class of runs against a remote or cloud endpoint, whose hardware nobody saw: one per
    provider. The endpoint's host is never part of it (uploads leave it out as private)."""
    name = engine_from_provider(provider) if provider else ""
    return _hw_class(
        kind="remote",
        key=f"remote|{slug(name) or '-'}",
        slug=_class_slug("remote", name or "endpoint"),
        label=f"Remote endpoint · {name}" if name else "Remote endpoint",
        chip=name,
        count=0,
    )


def unknown_class() -> HardwareClassFields:
    """The class of local runs whose files recorded no hardware at all (older exports)."""
    return _hw_class(
        kind="unknown", key="unknown", slug="unknown-hardware", label="Unknown hardware", count=0
    )


def _apple_chip(name: str) -> str:
    name = _SPACES.sub(" ", re.sub(r"\b(?:gpu|silicon)\b", " ", name, flags=re.I)).strip()
    if not name:
        return "Apple Silicon"
    return name if name.lower().startswith("apple") else f"Apple {name}"


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
# InternLM writes a size's decimal point as an underscore ("internlm2_5-1_8b-chat" is 1.8B,
# not 8B). Only after a hyphen, colon, slash or space: in "llama_3_8b" the underscores separate.
_PARAMS = re.compile(
    r"(?:(?:^|[-:/ ])(\d+(?:[._]\d+)?)|_(\d+(?:\.\d+)?))\s*([bm])(?=$|[-_.: ]|\b)",
    re.IGNORECASE,
)
_FAMILY = re.compile(r"^([a-z]+[0-9.]*[a-z]?)")


def normalise_model_id(model_id: str) -> str:
    """Display id: a .gguf path is reduced to its file stem; Ollama's ':latest' is dropped."""
    text = (model_id or "").strip()
    if text.lower().endswith(".gguf"):
        text = re.split(r"[\\/]", text)[-1][: -len(".gguf")]
    if text.lower().endswith(":latest"):
        text = text[: -len(":latest")]
    return text


def parse_model(model_id: str) -> ParsedModel:
    """Family, parameter count (billions) and quantization guessed from a model id."""
    norm = normalise_model_id(model_id)
    name = norm.rsplit("/", 1)[-1].lower()
    quant_match = _QUANT.search(name)
    params_match = _PARAMS.search(name)
    params_b = None
    if params_match:
        size = (params_match.group(1) or params_match.group(2)).replace("_", ".")
        params_b = float(size) / (1000 if params_match.group(3).lower() == "m" else 1)
    family_match = _FAMILY.match(name)
    return ParsedModel(
        model_id=norm,
        family=family_match.group(1).rstrip(".") if family_match else "",
        params_b=params_b,
        quantization=normalise_quant(quant_match.group(1)) if quant_match else "",
    )


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


_HEX_DIGEST = re.compile(r"(?:sha256[:-])?([0-9a-f]{64})")


def normalise_digest(digest: str) -> str:
    """A weights digest as stored: 64 lower-case hex digits, whether it came as a GGUF's sha256
    or as Ollama's "sha256:…" model digest; anything else is kept lower-cased and trimmed."""
    text = (digest or "").strip().lower()
    match = _HEX_DIGEST.fullmatch(text)
    return match.group(1) if match else text


def normalise_launch_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """Launch settings as they enter a stack's identity: unset values (None, "") are left out,
    so a setting that was not recorded and one recorded as empty are the same stack."""
    return {
        str(key): value
        for key, value in (settings or {}).items()
        if value is not None and value != ""
    }


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
    launch_settings: Mapping[str, Any] | None,
    method: str = DEFAULT_METHOD,
) -> str:
    """The comparability key: runs with the same key measured the same thing. It covers
    everything that changes a result apart from the hardware: the model and its weights
    digest, quantization, engine, harness, context, KV-cache type, draft model, the
    recorded launch settings and the measurement method (runs.methods). Our own method adds
    nothing to the key, so the keys stored before methods existed stay as they were."""
    method_part = {} if (method or DEFAULT_METHOD) == DEFAULT_METHOD else {"method": method}
    return canonical_hash(
        {
            **method_part,
            "model": normalise_model_id(model_id).lower(),
            "quant": normalise_quant(quantization),
            "sha256": normalise_digest(model_sha256),
            "engine": engine,
            "harness": harness or "raw",
            "ctx": context_length,
            "kv": (kv_cache_type or "").lower(),
            "draft": normalise_model_id(draft_model).lower(),
            "launch_settings": normalise_launch_settings(launch_settings),
        }
    )
