"""Plausibility checks against planted outliers: how many fakes the site's speed checks flag,
and how many honest runs they flag by mistake.

It builds, in memory, a dataset like the site's: machines of several vendors and sizes (multi-GPU,
Apple, CPU only), dense and MoE models in the quantizations people run, on the engines that fit.
Each lane (model, quantization, engine, hardware class) runs at its own fraction of the decode
roofline of its real weights file (45-85%; 35-75% for multi-GPU: one card's bandwidth under
llama.cpp's layer split, the sum under vLLM's tensor parallel), with per-machine and per-run
noise, 2% throttled runs and 1% that spilled weights to system memory (both honest); files hold
98-103% of their format's typical bits per weight. A tenth of the llama.cpp lanes declare
speculative decoding (a draft model, its draft length and acceptance) and decode faster than
the plain ceiling, as such runs do. Lanes measure a 512- or an 8,192-token prompt.

Then it plants outliers of eight kinds, in equal numbers: gross decode fakes (2-10x an honest
run), and the subtle ones: decode 1.3-1.6x the physical limit, prefill above the compute limit
on a GPU and on a CPU-only machine, a 10-75% of the possible first-token time on an 8,192-token
prompt, a multi-GPU layer split claiming more than one card can read (but less than the sum),
and undeclared speculation (1.5-3x the plain limit). Half of them arrive on a lane with fewer
than three approved peers, where only physics can catch them.

Every run, in time order, goes through submissions.integrity.plausibility, the function the
upload path calls, with the accelerator data file and the peers the site would find: earlier
approved runs of the same lane (honest runs, approved after review even when flagged, and the
outliers that were not caught). Rejected outliers never become peers.

Usage: .venv/bin/python bench/integrity_outliers.py [--runs 5000] [--outliers 400] [--seed 15]
       [--check]   (exit 1 unless recall >= 95%, >= 90% with < 3 peers, false flags <= 2%)
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchloop_site.settings")

import django  # noqa: E402

django.setup()

from runs import normalize, roofline  # noqa: E402
from runs.accelerators import catalog  # noqa: E402
from runs.models import Hardware, Stack  # noqa: E402
from submissions import integrity, run_facts  # noqa: E402

RECALL_TARGET = 0.95
SPARSE_RECALL_TARGET = 0.90
FALSE_FLAG_TARGET = 0.02
PROMPTS = (512, 8192)
LONG_PROMPT = 8192
KINDS = (
    "gross decode",
    "decode 1.3x",
    "prefill over compute (GPU)",
    "prefill over compute (CPU)",
    "impossible TTFT",
    "split cannot sum",
    "undeclared speculation",
)
SPECULATIVE_SHARE = 0.10

# (GPU as the machine reports it, count, VRAM GB, CPU, RAM GB, share of runs). Shares follow
# what people own: many consumer cards, fewer datacenter parts, a long tail.
MACHINES = [
    ("NVIDIA GeForce RTX 4090", 1, 24, "AMD Ryzen 9 7950X 16-Core Processor", 64, 14),
    ("NVIDIA GeForce RTX 3090", 1, 24, "AMD Ryzen 9 5950X 16-Core Processor", 64, 10),
    ("NVIDIA GeForce RTX 3090", 2, 24, "AMD Ryzen Threadripper PRO 7995WX 96-Cores", 256, 3),
    ("NVIDIA GeForce RTX 3090", 4, 24, "AMD EPYC 7763 64-Core Processor", 512, 1),
    ("NVIDIA GeForce RTX 3060", 1, 12, "Intel(R) Core(TM) i5-12400", 32, 6),
    ("NVIDIA GeForce RTX 4060 Ti", 1, 16, "Intel(R) Core(TM) i7-12700K", 32, 4),
    ("NVIDIA GeForce RTX 4070", 1, 12, "Intel(R) Core(TM) i7-12700K", 32, 4),
    ("NVIDIA GeForce RTX 4080", 1, 16, "13th Gen Intel(R) Core(TM) i9-13900K", 64, 4),
    ("NVIDIA GeForce RTX 4090", 2, 24, "AMD Ryzen Threadripper PRO 7995WX 96-Cores", 256, 1.5),
    ("NVIDIA GeForce RTX 4090 Laptop GPU", 1, 16, "13th Gen Intel(R) Core(TM) i9-13900K", 32, 2),
    ("NVIDIA GeForce RTX 5090", 1, 32, "AMD Ryzen 9 9950X 16-Core Processor", 96, 5),
    ("NVIDIA A100-SXM4-80GB", 1, 80, "AMD EPYC 7763 64-Core Processor", 512, 2),
    ("NVIDIA H100 80GB HBM3", 1, 80, "Intel(R) Xeon(R) Platinum 8480+", 1024, 3),
    ("NVIDIA H100 80GB HBM3", 2, 80, "Intel(R) Xeon(R) Platinum 8480+", 1024, 1),
    ("NVIDIA H200", 1, 141, "Intel(R) Xeon(R) Platinum 8592+", 1024, 0.6),
    ("NVIDIA L40S", 1, 48, "AMD EPYC 9654 96-Core Processor", 384, 1),
    ("NVIDIA RTX 6000 Ada Generation", 1, 48, "AMD EPYC 9654 96-Core Processor", 256, 0.8),
    ("AMD Radeon RX 7900 XTX", 1, 24, "AMD Ryzen 7 7800X3D 8-Core Processor", 64, 4),
    ("AMD Instinct MI300X", 1, 192, "AMD EPYC 9654 96-Core Processor", 1536, 0.4),
    ("Intel(R) Arc(TM) A770 Graphics", 1, 16, "Intel(R) Core(TM) i7-12700K", 32, 0.8),
    ("Apple M1 Max", 1, None, "Apple M1 Max", 64, 3),
    ("Apple M2 Ultra", 1, None, "Apple M2 Ultra", 192, 2),
    ("Apple M3 Max", 1, None, "Apple M3 Max", 128, 4),
    ("Apple M4 Pro", 1, None, "Apple M4 Pro", 48, 3),
    ("Apple M4 Max", 1, None, "Apple M4 Max", 128, 4),
    ("", 0, None, "AMD Ryzen 9 7950X 16-Core Processor", 64, 2),
    ("", 0, None, "AMD EPYC 9654 96-Core Processor", 768, 1.2),
    ("", 0, None, "Intel(R) Xeon(R) Platinum 8480+", 512, 0.8),
    ("", 0, None, "13th Gen Intel(R) Core(TM) i9-13900K", 64, 1),
    ("AMD Radeon 8060S Graphics", 1, None, "AMD RYZEN AI MAX+ 395 w/ Radeon 8060S", 128, 1.2),
]

# (model id as uploaded, popularity). Sizes come from the ids (or the MoE table), as on the site.
MODELS = [
    ("llama3.1:8b", 12),
    ("llama3.2:1b", 3),
    ("llama3.2:3b", 5),
    ("llama3.3:70b", 5),
    ("qwen2.5:0.5b", 1),
    ("qwen2.5:1.5b", 2),
    ("qwen2.5:3b", 2),
    ("qwen2.5:7b", 6),
    ("qwen2.5:14b", 4),
    ("qwen2.5:32b", 4),
    ("qwen2.5:72b", 2),
    ("qwen2.5-coder:7b", 3),
    ("qwen2.5-coder:32b", 3),
    ("qwen3:0.6b", 1),
    ("qwen3:1.7b", 2),
    ("qwen3:4b", 4),
    ("qwen3:8b", 8),
    ("qwen3:14b", 5),
    ("qwen3:32b", 5),
    ("qwen3:30b-a3b", 8),
    ("qwen3:235b-a22b", 1),
    ("gemma2:2b", 2),
    ("gemma2:9b", 3),
    ("gemma2:27b", 2),
    ("gemma3:1b", 2),
    ("gemma3:4b", 4),
    ("gemma3:12b", 5),
    ("gemma3:27b", 4),
    ("phi3.5:3.8b", 2),
    ("phi4:14b", 3),
    ("mistral:7b", 4),
    ("mistral-small:24b", 3),
    ("mistral-nemo:12b", 2),
    ("mixtral:8x7b", 2),
    ("mixtral:8x22b", 0.5),
    ("deepseek-r1:7b", 3),
    ("deepseek-r1:14b", 3),
    ("deepseek-r1:32b", 3),
    ("deepseek-coder-v2:16b", 1.5),
    ("gpt-oss:20b", 6),
    ("gpt-oss:120b", 2),
    ("llama4:scout", 1),
    ("granite3.1-moe:3b", 0.5),
    ("smollm2:1.7b", 1),
    ("olmoe-1b-7b", 0.3),
]
GGUF = [("Q4_K_M", 10), ("Q5_K_M", 2), ("Q6_K", 1.5), ("Q8_0", 3), ("Q4_0", 1), ("IQ4_XS", 1)]
# A real file's bits per weight against the format's typical figure (runs.roofline.TYPICAL_BITS;
# formats without one are at their floor, and real files hold a little more).
EXTRA_BITS = {"IQ4_XS": (1.02, 1.08), "AWQ": (1.02, 1.06)}
TYPICAL_SPREAD = (0.98, 1.03)


@dataclass
class Lane:
    hardware: Hardware
    stack: Stack
    decode: float
    prefill: float
    ttft: float
    # The physical limits of the lane's real weights file (what fakes are sized against).
    decode_limit: float = 0.0
    prefill_limit: float | None = None
    one_card_limit: float = 0.0
    prompt_tokens: int = 512

    @property
    def key(self) -> tuple:
        """What the site's peer query matches on (integrity.peer_values)."""
        return (
            self.stack.model_id.lower(),
            self.stack.quantization,
            self.stack.engine,
            integrity.hardware_class(self.hardware),
        )


@dataclass
class Run:
    lane: Lane
    at: float
    claim: integrity.Claim
    outlier: bool = False
    kind: str = ""
    sparse: bool = False
    peers: int = 0
    reasons: list[str] = field(default_factory=list)


def machine(spec: tuple) -> Hardware:
    gpu, count, vram, cpu, ram, _share = spec
    identity = normalize.hardware_identity(
        cpu=cpu, gpu=gpu, gpu_count=count, vram_gb=vram, ram_gb=ram, os_name="Linux"
    )
    return Hardware(**identity)


def engines_for(hardware: Hardware) -> list[tuple[str, list[tuple[str, float]]]]:
    """(engine, quantizations with weights) that people run on this machine."""
    gguf = [("llama.cpp", GGUF), ("ollama", GGUF)]
    if hardware.gpu_vendor == "apple":
        return [*gguf, ("mlx", [("mlx-4bit", 3), ("mlx-8bit", 1)])]
    if hardware.gpu_vendor == "nvidia" and (hardware.vram_gb or 0) >= 24:
        return [*gguf, ("vllm", [("AWQ", 2), ("FP8", 1), ("BF16", 1)])]
    return gguf


def memory_gb(hardware: Hardware) -> float:
    if hardware.gpu_model and hardware.gpu_vendor != "apple" and hardware.vram_gb:
        return hardware.vram_gb * max(hardware.gpu_count, 1)
    return hardware.ram_gb or 16


def pick(rng: random.Random, weighted: list[tuple]) -> object:
    return rng.choices([item[0] for item in weighted], [item[-1] for item in weighted])[0]


class World:
    """Lanes drawn on demand; each keeps its own efficiency, so peers agree with each other."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.machines = [(machine(spec), spec[-1]) for spec in MACHINES]
        self.lanes: dict[tuple, Lane] = {}
        self.catalog = catalog()

    def lane(self) -> Lane:
        rng = self.rng
        while True:
            hardware = pick(rng, self.machines)
            engine, quants = rng.choice(engines_for(hardware))
            model_id = pick(rng, MODELS)
            quant = pick(rng, quants)
            lane = self._lane(hardware, model_id, quant, engine)
            if lane is not None:
                return lane

    def _lane(self, hardware: Hardware, model_id: str, quant: str, engine: str) -> Lane | None:
        rng = self.rng
        parsed = normalize.parse_model(model_id)
        settings: dict = {}
        if engine == "vllm" and hardware.gpu_count > 1:
            settings["tensor_parallel"] = hardware.gpu_count
        if engine == "llama.cpp" and rng.random() < SPECULATIVE_SHARE:
            settings |= {
                "speculative": "draft",
                "spec_draft_n": rng.choice((3, 4, 5, 8)),
                "spec_acceptance": round(rng.uniform(0.5, 0.8), 2),
            }
        stack = Stack(
            model_id=parsed["model_id"],
            params_b=parsed["params_b"],
            quantization=normalize.normalise_quant(quant),
            engine=engine,
            launch_settings=settings,
        )
        probe = Lane(hardware, stack, 0, 0, 0)
        if probe.key in self.lanes:
            return self.lanes[probe.key]
        found = integrity.ceilings_for(stack, hardware, self.catalog)
        if isinstance(found, roofline.Unknown):
            raise SystemExit(f"dataset error: {found.reason}")
        spread = EXTRA_BITS.get(quant, TYPICAL_SPREAD)
        real_bits = found.bits.bits * rng.uniform(*spread)
        size_gb = found.weights.total_b * real_bits / 8
        if size_gb > 0.9 * memory_gb(hardware):
            return None  # does not fit: nobody runs it there
        limit = found.decode_tps * found.bits.bits / real_bits
        cards = found.source.count if found.source.split == roofline.TENSOR else 1
        one_card = limit / cards
        multi = hardware.gpu_count > 1
        share = rng.uniform(0.35, 0.75) if multi else rng.uniform(0.45, 0.85)
        decode = limit * share
        spec = run_facts.speculation_of(stack)
        if spec is not None:  # a draft model's tokens per read, less the draft's own cost
            factor, _why = integrity.speculation_allowance(spec)
            decode *= rng.uniform(0.45, 0.8) * factor
        if found.prefill_tps:
            prefill = found.prefill_tps * rng.uniform(0.12, 0.45)
            if hardware.gpu_model == "":  # CPUs reach less of their vector peak
                prefill = found.prefill_tps * rng.uniform(0.05, 0.3)
        else:
            prefill = decode * rng.uniform(4, 12)
        prompt = rng.choice(PROMPTS)
        ttft = prompt / prefill * 1000 + rng.uniform(15, 60)
        probe.decode, probe.prefill, probe.ttft = decode, prefill, ttft
        probe.decode_limit, probe.prefill_limit, probe.one_card_limit = (
            limit,
            found.prefill_tps,
            one_card,
        )
        probe.prompt_tokens = prompt
        self.lanes[probe.key] = probe
        return probe

    def honest(self, lane: Lane, machine_factor: float) -> integrity.Claim:
        rng = self.rng
        speed = machine_factor * math.exp(rng.gauss(0, 0.03))
        luck = rng.random()
        if luck < 0.01:  # weights partly spilled to system memory: honest, and far off its peers
            speed *= rng.uniform(0.25, 0.6)
        elif luck < 0.03:  # throttled or sharing the machine
            speed *= rng.uniform(0.7, 0.95)
        prefill = lane.prefill * machine_factor * math.exp(rng.gauss(0, 0.05))
        ttft = lane.ttft / machine_factor * math.exp(rng.gauss(0, 0.08))
        workload = run_facts.Workload(lane.prompt_tokens)
        return integrity.Claim(lane.decode * speed, prefill, ttft, workload)

    def fake(self, lane: Lane, kind: str) -> integrity.Claim:
        rng = self.rng
        honest = self.honest(lane, 1.0)
        decode, prefill, ttft = honest.decode_tps, honest.prefill_tps, honest.ttft_ms
        workload = honest.workload
        if kind == "gross decode":
            decode *= math.exp(rng.uniform(math.log(2), math.log(10)))
            if rng.random() < 0.5:
                boost = math.exp(rng.uniform(math.log(2), math.log(10)))
                prefill, ttft = prefill * boost, ttft / boost
        elif kind == "decode 1.3x":
            decode = lane.decode_limit * rng.uniform(1.3, 1.6)
        elif kind.startswith("prefill over compute"):
            prefill = (lane.prefill_limit or 0) * rng.uniform(1.3, 3.0)
            ttft = lane.prompt_tokens / prefill * 1000 + rng.uniform(15, 60)
        elif kind == "impossible TTFT":
            workload = run_facts.Workload(LONG_PROMPT)
            floor = LONG_PROMPT / (lane.prefill_limit or 1) * 1000
            ttft = floor * rng.uniform(0.1, 0.75)
        elif kind == "split cannot sum":
            cards = lane.hardware.gpu_count
            decode = lane.one_card_limit * rng.uniform(1.3, 0.9 * cards)
        elif kind == "undeclared speculation":
            decode = lane.decode_limit * rng.uniform(1.5, 3.0)
        return integrity.Claim(decode, prefill, ttft, workload)


def fits(kind: str, lane: Lane) -> bool:
    """Whether a lane can carry a fake of this kind."""
    hardware, settings = lane.hardware, lane.stack.launch_settings or {}
    plain = kind in ("decode 1.3x", "undeclared speculation", "split cannot sum")
    if plain and settings.get("speculative"):
        return False
    if kind == "prefill over compute (GPU)":
        return bool(hardware.gpu_model) and bool(lane.prefill_limit)
    if kind == "prefill over compute (CPU)":
        return not hardware.gpu_model and bool(lane.prefill_limit)
    if kind == "impossible TTFT":
        return bool(lane.prefill_limit)
    if kind == "split cannot sum":  # a layer split: one card's bandwidth bounds it
        return hardware.gpu_count > 1 and not settings.get("tensor_parallel")
    return True


def build(runs: int, outliers: int, seed: int) -> tuple[list[Run], World]:
    rng = random.Random(seed)
    world = World(rng)
    dataset = []
    for _ in range(runs):
        lane = world.lane()
        machine_factor = math.exp(rng.gauss(0, 0.05))  # this submitter's own machine
        dataset.append(Run(lane, rng.random(), world.honest(lane, machine_factor)))
    dataset.sort(key=lambda run: run.at)
    times: dict[tuple, list[float]] = defaultdict(list)
    for run in dataset:
        times[run.lane.key].append(run.at)
    planted = []
    peered = [run.lane for run in dataset if len(times[run.lane.key]) > 3]
    for index in range(outliers):
        kind = KINDS[index % len(KINDS)]
        if index % 2 == 0:  # on a lane with three or more earlier honest runs
            candidates = [lane for lane in peered if fits(kind, lane)]
            if candidates:
                lane = rng.choice(candidates)
            else:  # rare lanes (CPU-only, multi-GPU): give one its peers first
                lane = world.lane()
                while not fits(kind, lane):
                    lane = world.lane()
                for _ in range(4):
                    machine_factor = math.exp(rng.gauss(0, 0.05))
                    extra = Run(lane, rng.random(), world.honest(lane, machine_factor))
                    dataset.append(extra)
                    times[lane.key] = sorted([*times[lane.key], extra.at])
                peered += [lane] * 4
            at = rng.uniform(times[lane.key][2], 1.0)
            planted.append(Run(lane, at, world.fake(lane, kind), outlier=True, kind=kind))
        else:  # before the lane's third honest run: fewer than 3 peers
            lane = world.lane()
            while not fits(kind, lane):
                lane = world.lane()
            earlier = times[lane.key]
            at = rng.uniform(0, earlier[2] if len(earlier) > 2 else 1.0)
            fake = Run(lane, at, world.fake(lane, kind), outlier=True, kind=kind, sparse=True)
            planted.append(fake)
    return sorted(dataset + planted, key=lambda run: run.at), world


def check_all(dataset: list[Run], world: World) -> None:
    """Each run against the site's check, with the peers the site would have at that time."""
    approved: dict[tuple, list[tuple]] = defaultdict(list)
    for run in dataset:
        peers = approved[run.lane.key][-integrity.PEER_LIMIT :][::-1]
        run.peers = len(peers)
        run.reasons = integrity.plausibility(
            run.claim,
            stack=run.lane.stack,
            hardware=run.lane.hardware,
            peers=peers,
            catalog=world.catalog,
        )
        if not run.outlier or not run.reasons:
            approved[run.lane.key].append(run.claim.values())


def kind(reason: str) -> str:
    if reason.startswith(integrity.NO_CEILING):
        return "no ceiling known"
    if reason.startswith(integrity.SPLIT_UNKNOWN):
        return "split mode unknown"
    if " > ceiling " in reason:
        return "ceiling"
    if " < floor " in reason:
        return "TTFT floor"
    return "peers"


def summarise(dataset: list[Run], world: World, seconds: float) -> dict:
    fakes = [run for run in dataset if run.outlier]
    honest = [run for run in dataset if not run.outlier]
    caught = [run for run in fakes if run.reasons]
    wrong = [run for run in honest if run.reasons]
    # Counted from the peers each outlier met, not from how it was planted.
    sparse = [run for run in fakes if run.peers < integrity.MIN_PEERS]
    classes = {integrity.hardware_class(run.lane.hardware) for run in dataset}
    models = {run.lane.stack.model_id for run in dataset}
    moe = {
        m
        for m in models
        if (w := roofline.model_weights(m, normalize.parse_model(m)["params_b"])) and w.is_moe
    }
    by = Counter(kind(reason) for run in caught for reason in run.reasons)
    return {
        "runs": len(dataset),
        "honest": len(honest),
        "outliers": len(fakes),
        "sparse_outliers": len(sparse),
        "hardware_classes": len(classes),
        "vendors": sorted({run.lane.hardware.gpu_vendor or "cpu" for run in dataset}),
        "models": len(models),
        "moe_models": len(moe),
        "lanes": len({run.lane.key for run in dataset}),
        "recall": len(caught) / len(fakes),
        "recall_sparse": sum(bool(run.reasons) for run in sparse) / len(sparse),
        "recall_with_peers": sum(bool(r.reasons) for r in fakes if r not in sparse)
        / max(len(fakes) - len(sparse), 1),
        "recall_by_kind": {
            name: _share([run for run in fakes if run.kind == name]) for name in KINDS
        },
        "recall_sparse_by_kind": {
            name: _share([run for run in sparse if run.kind == name]) for name in KINDS
        },
        "speculative_honest": sum(bool(r.lane.stack.launch_settings) for r in honest),
        "speculative_honest_flagged": sum(bool(r.lane.stack.launch_settings) for r in wrong),
        "throttled_or_spilled_flagged": sum(
            r.claim.decode_tps < 0.9 * r.lane.decode for r in wrong
        ),
        "false_flag_rate": len(wrong) / len(honest),
        "false_flags": Counter(kind(reasons[0]) for reasons in (r.reasons for r in wrong)),
        "caught_by": dict(by),
        "missed_examples": [run.reasons or _miss(run, world) for run in fakes if not run.reasons][
            :5
        ],
        "seconds": round(seconds, 2),
    }


def _share(runs: list[Run]) -> str:
    caught = sum(bool(run.reasons) for run in runs)
    return f"{caught}/{len(runs)}" if runs else "0/0"


def _miss(run: Run, world: World) -> str:
    found = integrity.ceilings_for(run.lane.stack, run.lane.hardware, world.catalog)
    return (
        f"missed {run.kind}: {run.lane.stack.model_id} {run.lane.stack.quantization} on "
        f"{run.lane.hardware.label}: claimed {run.claim.decode_tps:,.0f} tok/s, honest "
        f"{run.lane.decode:,.0f}, ceiling {found.decode_tps:,.0f}; prefill "
        f"{run.claim.prefill_tps or 0:,.0f} (ceiling {found.prefill_tps or 0:,.0f}); TTFT "
        f"{run.claim.ttft_ms or 0:,.1f} ms for {run.claim.workload.prompt_tokens} tokens"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--outliers", type=int, default=420)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    dataset, world = build(args.runs, args.outliers, args.seed)
    check_all(dataset, world)
    result = summarise(dataset, world, time.perf_counter() - started)
    for name, value in result.items():
        rate = isinstance(value, float) and name.startswith(("recall", "false_flag_rate"))
        shown = f"{value:.2%}" if rate else value
        print(f"{name}: {shown}")
    print(
        f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}"
    )
    met = (
        result["recall"] >= RECALL_TARGET
        and result["recall_sparse"] >= SPARSE_RECALL_TARGET
        and result["false_flag_rate"] <= FALSE_FLAG_TARGET
    )
    print(
        f"targets (recall >= {RECALL_TARGET:.0%}, >= {SPARSE_RECALL_TARGET:.0%} with < 3 "
        f"peers, false flags <= {FALSE_FLAG_TARGET:.0%}): "
        f"{'met' if met else 'MISSED'}"
    )
    return 0 if met or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
