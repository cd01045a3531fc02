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

from runs.importers.records import HardwareRecord, RunRecord, SuiteRecord

V3_CORE_WEIGHTS = {
    "toolcall": 0.20,
    "coding": 0.25,
    "dataextract": 0.15,
    "instructfollow": 0.15,
    "reasonmath": 0.25,
}


@dataclass(frozen=True)
class DemoHardware:
    gpu: str
    vram_gb: float
    bandwidth_gbs: float
    cpu: str
    ram_gb: float
    os_name: str
    gpu_count: int = 1


HARDWARE = [
    DemoHardware("NVIDIA GeForce RTX 3060", 12, 360, "AMD Ryzen 5 5600X", 32, "Linux"),
    DemoHardware("NVIDIA GeForce RTX 3090", 24, 936, "AMD Ryzen 9 5950X", 64, "Linux"),
    DemoHardware(
        "NVIDIA GeForce RTX 4070 Ti SUPER", 16, 672, "Intel Core i7-13700K", 32, "Windows"
    ),
    DemoHardware("NVIDIA GeForce RTX 4090", 24, 1008, "AMD Ryzen 9 7950X", 64, "Linux"),
    DemoHardware("NVIDIA GeForce RTX 5090", 32, 1792, "AMD Ryzen 9 9950X", 96, "Linux"),
    DemoHardware("NVIDIA RTX A6000", 48, 768, "AMD EPYC 7443P", 256, "Linux"),
    DemoHardware("NVIDIA H100 80GB HBM3", 80, 3350, "Intel Xeon Platinum 8480+", 512, "Linux"),
    DemoHardware("AMD Radeon RX 7900 XTX", 24, 960, "AMD Ryzen 7 7800X3D", 32, "Linux"),
    DemoHardware("Apple M1 Pro", 32, 200, "Apple M1 Pro", 32, "Darwin"),
    DemoHardware("Apple M2 Max", 96, 400, "Apple M2 Max", 96, "Darwin"),
    DemoHardware("Apple M4 Pro", 48, 273, "Apple M4 Pro", 48, "Darwin"),
    DemoHardware("", 0, 80, "AMD Ryzen 9 7950X", 64, "Linux", gpu_count=0),
    DemoHardware(
        "NVIDIA GeForce RTX 3090", 48, 936, "AMD Threadripper 3960X", 128, "Linux", gpu_count=2
    ),
]

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
HARNESSES = ["raw", "raw", "raw", "hermes", "qwen"]
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
    stacks: dict[tuple, DemoStack] = {}
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


def demo_run(
    rng: random.Random, stack: DemoStack, submitter: str, *, index: int, now: datetime | None = None
) -> RunRecord | None:
    """One plausible run of the stack on a random machine it fits on, or None if none does."""
    size_gb = stack.params_b * stack.bits / 8
    fitting = [h for h in HARDWARE if (h.vram_gb or h.ram_gb * 0.7) >= size_gb * 1.1]
    if not fitting:
        return None
    hw = rng.choice(fitting)
    efficiency = rng.uniform(0.55, 0.75) * stack.engine_factor
    decode = hw.bandwidth_gbs / size_gb * efficiency
    samples = [max(0.5, rng.gauss(decode, decode * 0.04)) for _ in range(18)]
    samples.sort()
    prefill = decode * rng.uniform(8, 30)
    ttft = 1000 * 512 / prefill
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
    mean = sum(samples) / len(samples)
    stdev = math.sqrt(sum((x - mean) ** 2 for x in samples) / (len(samples) - 1))
    return RunRecord(
        source_format="demo",
        started_at=started,
        model_id=stack.model_id,
        quantization=stack.quant,
        score_scale="v3",
        client_run_id=f"demo-{index}",
        engine=stack.engine,
        engine_version=stack.engine_version,
        provider="ollama" if stack.engine == "ollama" else "openai_compat",
        harness=stack.harness,
        harness_version="v1",
        context_length=stack.context_length,
        hardware=HardwareRecord(
            cpu=hw.cpu,
            gpu=hw.gpu,
            gpu_count=hw.gpu_count,
            vram_gb=hw.vram_gb or None,
            ram_gb=hw.ram_gb,
            os_name=hw.os_name,
        ),
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
        speed={
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
        },
        speed_sample_count=len(samples),
        total_runtime_sec=rng.uniform(300, 1800),
        submitter_name=submitter,
        suites=[SuiteRecord(suite="speed", score=s, task_count=9, pass_count=9)]
        + [
            SuiteRecord(suite=name, score=score, task_count=15, pass_count=round(15 * score / 100))
            for name, score in suites.items()
        ],
        raw_payload={"demo": True},
    )
