"""Synthetic but physically plausible demo runs (no Django imports).

Decode speed follows memory bandwidth / bytes read per token, which is what bounds
single-stream decoding on every engine; quality grows with parameter count and falls with
aggressive quantization. The numbers are invented; their shape is realistic.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache, cached_property

from runs.importers.records import HardwareRecord, ImportedSuite, RunRecord

V3_CORE_WEIGHTS = {
    "toolcall": 0.20,
    "coding": 0.25,
    "dataextract": 0.15,
    "instructfollow": 0.15,
    "reasonmath": 0.25,
}


@dataclass(frozen=True)
class DemoHardware:
    """A demo machine. `vram_gb` is all cards' memory together (as the CLI records it),
    `bandwidth_gbs` and `tflops` (dense FP16) are per card; a machine without a GPU has its
    system memory's bandwidth. A remote endpoint has no machine and a provider."""

    gpu: str
    vram_gb: float
    bandwidth_gbs: float
    cpu: str
    ram_gb: float
    os_name: str
    gpu_count: int = 1
    tflops: float = 0.0
    memory_channels: int | None = None
    provider: str = ""

    @cached_property
    def kind(self) -> str:
        if self.provider:
            return "remote"
        if self.gpu.startswith("Apple"):
            return "apple"
        return "gpu" if self.gpu else "cpu"

    def usable_gb(self) -> float:
        """What a model may occupy: the cards' memory, ~75% of unified memory, ~70% of RAM."""
        if self.kind == "gpu":
            return self.vram_gb
        return self.ram_gb * (0.75 if self.kind == "apple" else 0.7)


def _gpu(
    name: str,
    vram: float,
    bw: float,
    tflops: float,
    cpu: str,
    ram: float,
    os_name: str = "Linux",
    count: int = 1,
) -> DemoHardware:
    return DemoHardware(name, vram * count, bw, cpu, ram, os_name, count, tflops)


def _apple(chip: str, memory: float, bw: float, tflops: float) -> DemoHardware:
    return DemoHardware(f"{chip} GPU", memory, bw, chip, memory, "Darwin", 1, tflops)


def _cpu(cpu: str, ram: float, bw: float, tflops: float, channels: int) -> DemoHardware:
    return DemoHardware("", 0, bw, cpu, ram, "Linux", 0, tflops, channels)


# Published memory bandwidth (GB/s) and dense FP16 throughput (TFLOPS) of each part, rounded.
HARDWARE = [
    _gpu("NVIDIA GeForce RTX 3060", 12, 360, 25, "AMD Ryzen 5 5600X", 32),
    _gpu("NVIDIA GeForce RTX 4060 Ti", 16, 288, 44, "Intel Core i5-13600K", 32, "Windows"),
    _gpu("NVIDIA GeForce RTX 3090", 24, 936, 71, "AMD Ryzen 9 5950X", 64),
    _gpu("NVIDIA GeForce RTX 4070 Ti SUPER", 16, 672, 88, "Intel Core i7-13700K", 32, "Windows"),
    _gpu("NVIDIA GeForce RTX 4080", 16, 717, 97, "AMD Ryzen 7 7800X3D", 32, "Windows"),
    _gpu("NVIDIA GeForce RTX 4090", 24, 1008, 165, "AMD Ryzen 9 7950X", 64),
    _gpu("NVIDIA GeForce RTX 5090", 32, 1792, 209, "AMD Ryzen 9 9950X", 96),
    _gpu("NVIDIA RTX A6000", 48, 768, 155, "AMD EPYC 7443P", 256),
    _gpu("NVIDIA L40S", 48, 864, 362, "AMD EPYC 9354", 384),
    _gpu("NVIDIA A100 80GB PCIe", 80, 1935, 312, "AMD EPYC 7763", 512),
    _gpu("NVIDIA H100 80GB HBM3", 80, 3350, 989, "Intel Xeon Platinum 8480+", 1024),
    _gpu("NVIDIA H200", 141, 4800, 989, "Intel Xeon Platinum 8480+", 2048),
    _gpu("NVIDIA GeForce RTX 3090", 24, 936, 71, "AMD Threadripper 3960X", 128, count=2),
    _gpu("NVIDIA GeForce RTX 4090", 24, 1008, 165, "AMD Threadripper 7960X", 256, count=2),
    _gpu("NVIDIA A100 80GB PCIe", 80, 1935, 312, "AMD EPYC 7763", 1024, count=4),
    _gpu("AMD Radeon RX 7800 XT", 16, 624, 74, "AMD Ryzen 7 7700X", 32),
    _gpu("AMD Radeon RX 7900 XTX", 24, 960, 123, "AMD Ryzen 7 7800X3D", 32),
    _gpu("AMD Radeon PRO W7900", 48, 864, 122, "AMD Ryzen 9 7950X", 128),
    _gpu("AMD Instinct MI300X", 192, 5300, 1307, "AMD EPYC 9654", 1536),
    _gpu("Intel Arc A770", 16, 560, 39, "Intel Core i7-12700K", 32),
    _gpu("Intel Arc B580", 12, 456, 58, "Intel Core i5-14400F", 32, "Windows"),
    _apple("Apple M1 Pro", 32, 200, 5.2),
    _apple("Apple M2 Max", 64, 400, 13.6),
    _apple("Apple M2 Max", 96, 400, 13.6),
    _apple("Apple M3 Max", 128, 400, 16.4),
    _apple("Apple M4 Pro", 48, 273, 9.2),
    _apple("Apple M4 Max", 128, 546, 18.4),
    _apple("Apple M2 Ultra", 192, 800, 27.2),
    _cpu("AMD Ryzen 9 7950X 16-Core Processor", 64, 83, 2.0, 2),
    _cpu("13th Gen Intel(R) Core(TM) i7-13700K", 32, 76, 1.5, 2),
    _cpu("AMD EPYC 7763 64-Core Processor", 512, 204, 4.0, 8),
    _cpu("Intel(R) Xeon(R) Platinum 8480+", 512, 307, 8.0, 8),
    DemoHardware("", 0, 0, "", 0, "", 0, provider="openai_compat"),
]
# Engines that run on each kind of machine (vLLM wants a datacentre-style GPU stack).
ENGINES_FOR_KIND = {
    "gpu": {"llama.cpp", "ollama", "vllm", "lm-studio"},
    "apple": {"llama.cpp", "ollama", "lm-studio"},
    "cpu": {"llama.cpp", "ollama"},
    "remote": {"vllm", "llama.cpp"},
}

# (model id, billions of parameters, base quality at full precision)
MODELS = [
    ("qwen3:8b", 8.2, 58),
    ("qwen3:14b", 14.8, 64),
    ("qwen3:32b", 32.8, 71),
    ("qwen3-coder:30b-a3b", 30.5, 66),
    ("llama3.1:8b", 8.0, 49),
    ("llama3.3:70b", 70.6, 70),
    ("gemma3:4b", 4.3, 44),
    ("gemma3:12b", 12.2, 57),
    ("gemma3:27b", 27.4, 65),
    ("mistral-small3.2:24b", 24.0, 62),
    ("phi4:14b", 14.7, 59),
    ("gpt-oss:20b", 20.9, 67),
    ("deepseek-r1:8b", 8.2, 52),
    ("smollm2:1.7b", 1.7, 28),
    ("granite3.3:8b", 8.2, 50),
]
# Mixture-of-experts models read only their active parameters per decoded token.
ACTIVE_PARAMS_B = {"qwen3-coder:30b-a3b": 3.3, "gpt-oss:20b": 3.6}
# (quant, bits per weight, quality multiplier)
QUANTS = [
    ("Q4_K_M", 4.85, 0.95),
    ("Q5_K_M", 5.7, 0.975),
    ("Q8_0", 8.5, 0.995),
    ("IQ4_XS", 4.25, 0.93),
    ("F16", 16, 1.0),
]
ENGINES = [
    ("llama.cpp", "b6512", 1.0),
    ("ollama", "0.12.3", 0.93),
    ("vllm", "0.11.0", 1.08),
    ("lm-studio", "0.3.27", 0.97),
]
# Prompt formats only: a real agent program (aider, ...) runs the matrix suites alone, and these
# synthetic runs hold the regular suites.
HARNESSES = ["raw", "raw", "raw", "xml-tool-call", "xml-function-call"]
SUBMITTERS = [
    "ada",
    "grace",
    "linus",
    "margaret",
    "ken",
    "barbara",
    "dennis",
    "frances",
    "edsger",
    "radia",
    "vint",
    "hedy",
]


def local_speed_score(tok_s: float) -> float:
    return 0.0 if tok_s <= 0 else max(0.0, min(100.0, 12.54 * math.log2(tok_s) + 0.9))


@dataclass(frozen=True)
class DemoStack:
    model_id: str
    params_b: float
    base_quality: float
    quant: str
    bits: float
    quant_factor: float
    engine: str
    engine_version: str
    engine_factor: float
    harness: str
    context_length: int


def demo_stacks(rng: random.Random, count: int) -> list[DemoStack]:
    stacks: dict[tuple[str, str, str, str, int], DemoStack] = {}
    attempts = 0
    while len(stacks) < count and attempts < count * 50:
        attempts += 1
        model, params, quality = rng.choice(MODELS)
        quant, bits, qfactor = rng.choice(QUANTS)
        engine, version, efactor = rng.choice(ENGINES)
        harness = rng.choice(HARNESSES)
        context = rng.choice([4096, 8192, 16384, 32768, 65536, 131072])
        key = (model, quant, engine, harness, context)
        stacks.setdefault(
            key,
            DemoStack(
                model,
                params,
                quality,
                quant,
                bits,
                qfactor,
                engine,
                version,
                efactor,
                harness,
                context,
            ),
        )
    return list(stacks.values())


def _weight(hw: DemoHardware) -> float:
    """How often a demo machine is picked: consumer cards and Macs far more than a datacentre."""
    if hw.kind == "gpu":
        if hw.bandwidth_gbs > 1500 or hw.gpu_count > 1:
            return 1.0
        # The 24 GB cards are what most people run local models on.
        return 6.0 if hw.vram_gb == 24 and "GeForce" in hw.gpu else 3.0
    return {"apple": 2.0, "cpu": 1.0, "remote": 1.5}[hw.kind]


WEIGHTS = [_weight(hw) for hw in HARDWARE]


def fits(hw: DemoHardware, stack: DemoStack) -> bool:
    if stack.engine not in ENGINES_FOR_KIND[hw.kind]:
        return False
    return hw.kind == "remote" or hw.usable_gb() >= stack.params_b * stack.bits / 8 * 1.1


def speeds(rng: random.Random, hw: DemoHardware, stack: DemoStack) -> tuple[float, float]:
    """(decode, prefill) tok/s of the stack on the machine: decode is bound by memory bandwidth
    over the bytes read per token (active parameters for a mixture of experts), prefill by
    compute over two FLOPs per active parameter; each at a plausible fraction of its ceiling."""
    active_b = ACTIVE_PARAMS_B.get(stack.model_id, stack.params_b)
    active_gb = active_b * stack.bits / 8
    if hw.kind == "remote":  # someone else's datacentre: fast, and not bound by this machine
        decode = rng.uniform(40, 160) * (8 / max(active_b, 1)) ** 0.3
        return decode, decode * rng.uniform(15, 40)
    bandwidth, tflops = hw.bandwidth_gbs, hw.tflops
    if hw.gpu_count > 1 and stack.engine == "vllm":  # tensor parallel reads cards at once
        bandwidth, tflops = bandwidth * hw.gpu_count * 0.75, tflops * hw.gpu_count * 0.75
    decode = bandwidth / active_gb * rng.uniform(0.55, 0.75) * stack.engine_factor
    prefill = tflops * 1e12 / (2 * active_b * 1e9) * rng.uniform(0.25, 0.5)
    return decode, max(prefill, decode * 2)


def machines_for(stack: DemoStack) -> list[DemoHardware]:
    return [hw for hw, _weight in _fitting(stack)]


@cache
def _fitting(stack: DemoStack) -> tuple[tuple[DemoHardware, float], ...]:
    """The machines a stack fits on, with their weights (asked once per stack: a million-run
    seed would otherwise spend most of its time here)."""
    return tuple((hw, w) for hw, w in zip(HARDWARE, WEIGHTS, strict=True) if fits(hw, stack))


def _demo_machine(hw: DemoHardware) -> HardwareRecord | None:
    """The machine a demo run records; none for a remote endpoint."""
    if hw.kind == "remote":
        return None
    return HardwareRecord(
        cpu=hw.cpu,
        gpu=hw.gpu,
        gpu_count=hw.gpu_count,
        vram_gb=hw.vram_gb or None,
        ram_gb=hw.ram_gb,
        os_name=hw.os_name,
        memory_channels=hw.memory_channels,
    )


def _speed_summary(samples: list[float], prefill: float, ttft: float) -> dict[str, float | None]:
    """The speed figures of sorted decode samples, with a prefill speed and a TTFT."""
    median = samples[len(samples) // 2]
    mean = sum(samples) / len(samples)
    stdev = math.sqrt(sum((x - mean) ** 2 for x in samples) / (len(samples) - 1))
    return {
        "decode_tps_median": median,
        "decode_tps_mean": mean,
        "decode_tps_stdev": stdev,
        "decode_tps_p5": samples[1],
        "decode_tps_p95": samples[-2],
        "decode_tps_peak": samples[-1],
        "prefill_tps_median": prefill,
        "prefill_tps_mean": prefill,
        "ttft_ms_median": ttft,
        "ttft_ms_mean": ttft * 1.02,
        "ttft_ms_p5": ttft * 0.9,
        "ttft_ms_p95": ttft * 1.2,
        "ttft_ms_peak": ttft * 0.88,
    }


def _demo_suite(name: str, score: float) -> ImportedSuite:
    passed = round(15 * score / 100)
    return ImportedSuite(
        suite=name, score=score, task_count=15, pass_count=passed, fail_count=15 - passed
    )


def demo_run(
    rng: random.Random,
    stack: DemoStack,
    submitter: str,
    *,
    index: int,
    now: datetime | None = None,
    hardware: DemoHardware | None = None,
) -> RunRecord | None:
    """One plausible run of the stack on `hardware`, or on a random machine it fits on; None
    if it fits on none."""
    hw = hardware
    if hw is None:
        pairs = _fitting(stack)
        if not pairs:
            return None
        (hw,) = rng.choices([hw for hw, _ in pairs], weights=[w for _, w in pairs])
    decode, prefill = speeds(rng, hw, stack)
    samples = [max(0.5, rng.gauss(decode, decode * 0.04)) for _ in range(18)]
    samples.sort()
    ttft = 1000 * 512 / prefill + rng.uniform(5, 40)
    quality = min(98.0, stack.base_quality * stack.quant_factor * rng.uniform(0.93, 1.05))
    suites = {
        name: round(min(100.0, max(0.0, rng.gauss(quality, 9))), 2) for name in V3_CORE_WEIGHTS
    }
    q = round(sum(suites[s] * w for s, w in V3_CORE_WEIGHTS.items()), 2)
    failures = rng.choice([0, 0, 0, 0, 1, 2])
    r = round(100 * (81 - failures) / 81, 2)
    median = samples[len(samples) // 2]
    s = round(local_speed_score(median), 2)
    started = (now or datetime.now(UTC)) - timedelta(minutes=17 * index + rng.randint(0, 600))
    return RunRecord(
        source_format="demo",
        started_at=started,
        model_id=stack.model_id,
        quantization=stack.quant,
        score_scale="v3",
        client_run_id=f"demo-{index}",
        engine=stack.engine,
        engine_version=stack.engine_version,
        provider=hw.provider or ("ollama" if stack.engine == "ollama" else "openai_compat"),
        harness=stack.harness,
        harness_version="v1",
        context_length=stack.context_length,
        hardware=_demo_machine(hw),
        scoring_mode="remote" if hw.kind == "remote" else "local",
        benchmark_version="3.1.0",
        profile="core",
        requested_profile="core",
        score_schema_version="3.1.0",
        manifest_hash="sha256:" + "d3" * 32,
        coverage_score=100.0,
        comparable=True,
        overall_score=round(0.70 * q + 0.25 * s + 0.05 * r, 2),
        quality_score=q,
        speed_score=s,
        reliability_score=r,
        value_score=round(q * min(median / 100, 1) * r / 100, 2),
        speed=_speed_summary(samples, prefill, ttft),
        speed_sample_count=len(samples),
        total_runtime_sec=rng.uniform(300, 1800),
        submitter_name=submitter,
        suites=[ImportedSuite(suite="speed", score=s, task_count=9, pass_count=9)]
        + [_demo_suite(name, score) for name, score in suites.items()],
        raw_payload={"demo": True},
    )
