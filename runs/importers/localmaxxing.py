"""LocalMaxxing's public leaderboard as the llmfit repository embeds it
(llmfit-core/data/benchmark_cache.json): `presets`, one per hardware group with at most 200
top-ranked rows each, and in each row the model, hardware, engine and its flags, the workload
and the speeds one person measured."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from runs import bounds, normalize
from runs.importers.community_shared import (
    HARDWARE_NOT_MAPPED,
    LLMFIT_COMMIT,
    LLMFIT_REPOSITORY,
    LOCALMAXXING_LICENCE,
    MODEL_NOT_MAPPED,
    Command,
    Parsed,
    SourceReport,
    apple_chip,
    apple_hardware,
    cpu_name,
    engine_name,
    gpu_name,
    hardware_problem,
    known,
    kv_cache,
    merge_repeats,
    model_id_and_quant,
    os_family,
    provenance,
    scrub_command,
    speed_record,
)
from runs.importers.records import HardwareRecord, JsonObject, Node, RunRecord

SOURCE = "localmaxxing"
PATH = "llmfit-core/data/benchmark_cache.json"
# What two submissions of one measurement do not share: it is not part of the measurement.
_NOT_THE_MEASUREMENT = frozenset(
    {"id", "createdAt", "rank", "reactionCounts", "myEmoji", "user", "notes"}
    | {"hardwareGroupLabel", "hardwareGroupKey"}
)
# Left out of the stored row: who sent it and how others reacted, and the notes, whose free
# text names machines, folders and people in ways no rule can find (the flags stay, cleaned).
_NOT_KEPT = frozenset({"user", "notes", "reactionCounts", "myEmoji", "rank"})
_PRESET_MEMORY = re.compile(r"^(.*?)\s*\((\d+(?:\.\d+)?)\s*GB\)\s*$", re.IGNORECASE)
# The programs whose name says how the figures were taken (in-process or over HTTP).
_TOOLS = frozenset(
    {
        "llama-bench", "llama-server", "llama-cli", "llama-batched-bench", "vllm", "sglang",
        "mlx_lm.benchmark", "mlx_lm.server", "ollama", "hipfire", "dflash_spec_demo",
        "test_dflash",
    }
)  # fmt: skip
# The servers' flags for how many sequences they decode at once (llama-server's slots, vLLM's
# and SGLang's running requests).
_SLOTS = ("-np", "--parallel", "--max-num-seqs", "--max-running-requests")


def detect(document: object) -> bool:
    if not isinstance(document, dict):
        return False
    presets = document.get("presets")
    return (
        isinstance(presets, dict)
        and bool(presets)
        and all(isinstance(p, dict) and isinstance(p.get("rows"), list) for p in presets.values())
    )


class _LeftOut(Exception):
    def __init__(self, reason: str, *, figure: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.figure = figure


@dataclass
class _Row:
    node: Node
    preset: str
    row_id: str
    created: datetime


def parse(document: object) -> Parsed:
    """Every distinct measurement in the cache as one record; rows repeating one under other
    ids are merged into it (provenance counts and lists them)."""
    root = Node(document)
    report = SourceReport(SOURCE, files=1)
    scraped = root.get("scraped_at", required=False).str()
    rows: dict[str, _Row] = {}
    for label, preset in root.get("presets").items():
        for row in preset.get("rows").list():
            report.rows += 1
            row_id = row.get("id").str()
            if not row_id.strip():
                raise row.get("id").fail("is empty")
            if row_id in rows:  # one row in two presets (the RX 7900 XT group lists XTX rows)
                report.listed_twice += 1
                continue
            rows[row_id] = _Row(row, label, row_id, row.get("createdAt").timestamp())
    records = []
    for group in merge_repeats(
        rows.values(), key=_measurement, order=lambda r: (r.created, r.row_id)
    ):
        ids = [r.row_id for r in group]
        try:
            record = _record(group[0], ids, scraped)
        except _LeftOut as out:
            for row_id in ids:
                report.leave_out(row_id, out.reason, figure=out.figure)
            continue
        records.append(record)
        report.duplicates_merged += len(ids) - 1
    report.records = len(records)
    return Parsed(records, report)


def _measurement(row: _Row) -> str:
    data = row.node.obj()
    return normalize.canonical_hash(
        {k: v for k, v in data.items() if k not in _NOT_THE_MEASUREMENT}
    )


def _record(row: _Row, ids: list[str], scraped: str) -> RunRecord:
    node = row.node
    model, engine, flags = node.get("model"), node.get("engine"), node.get("engineFlags")
    hardware = _hardware(node.get("hardware"), row.preset)
    engine_key = engine_name(engine.get("engineName", required=False).str())
    raw_model = (
        model.get("hfId", required=False).str() or model.get("displayName", required=False).str()
    )
    model_id, quant = model_id_and_quant(
        raw_model, quantization=engine.get("quantization", required=False).str(), engine=engine_key
    )
    if not model_id:
        raise _LeftOut(f"{MODEL_NOT_MAPPED}: the row names no Hugging Face id or model")
    if not engine_key:
        raise _LeftOut(f"{MODEL_NOT_MAPPED}: the row names no engine")
    speed = {
        "decode_tps_median": node.get("tokSOut", required=False).num(minimum=0) or None,
        "prefill_tps_median": node.get("tokSPrefill", required=False).num(minimum=0) or None,
        "ttft_ms_median": node.get("ttftMs", required=False).num(minimum=0) or None,
    }
    if not speed["decode_tps_median"] and not speed["prefill_tps_median"]:
        raise _LeftOut("no speed figure", figure=True)
    snippet = flags.get("commandSnippet", required=False).str(max_length=20_000, kind=bounds.RAW)
    command = Command() if snippet.lstrip().startswith(("[", "{")) else scrub_command(snippet)
    streams = _concurrent(node, command)
    if streams > 1:
        raise _LeftOut(
            f"no single-stream figure: {streams} requests at once to a server decoding several, "
            "whose decode is their aggregate throughput (the board ranks one stream's decode)",
            figure=True,
        )
    speculative, draft = _speculation(flags, command)
    settings = _settings(node, model, engine, flags, command) | {"speculative": speculative}
    kv = kv_cache(flags.get("kvCacheDtype", required=False).str()) or kv_cache(
        command.value("-ctk", "--cache-type-k"), command.value("-ctv", "--cache-type-v")
    )
    raw = {k: v for k, v in node.obj().items() if k not in _NOT_KEPT}
    raw["engineFlags"] = {**flags.obj(), "commandSnippet": command.text}
    return speed_record(
        method=SOURCE,
        row_id=ids[0],
        started_at=row.created,
        model_id=model_id,
        quantization=quant,
        engine=engine_key,
        engine_version=engine.get("engineVersion", required=False).str()[:80],
        context_length=node.get("contextLength", required=False).int(minimum=1),
        kv_cache_type=kv[:40],
        draft_model=draft,
        launch_settings=settings,
        hardware=hardware,
        speed=speed,
        command_used=command.text,
        provenance=provenance(
            source=SOURCE,
            repository=LLMFIT_REPOSITORY,
            commit=LLMFIT_COMMIT,
            path=PATH,
            row_ids=ids,
            licence=LOCALMAXXING_LICENCE,
            via="llmfit",
            scraped_at=scraped or None,
        ),
        raw=raw,
    )


def _hardware(node: Node, preset: str) -> HardwareRecord:
    """The row's machine: a GPU model with its count and memory per card, an Apple chip with
    its unified memory, or a CPU."""
    kind = node.get("hwClass").str()
    cpu = cpu_name(node.get("cpu", required=False).str())
    os_name = os_family(node.get("os", required=False).str())
    if node.get("isHeterogeneousGpu", required=False).bool():
        raise _LeftOut(f"{HARDWARE_NOT_MAPPED}: mixed GPUs without their names")
    if kind == "UNIFIED":
        family = known(node.get("chipFamily", required=False).str())
        variant = known(node.get("chipVariant", required=False).str())
        named = variant if variant.lower().startswith(family.lower()) else f"{family} {variant}"
        chip = apple_chip(named) or apple_chip(cpu)
        if known(node.get("chipVendor", required=False).str()).lower() != "apple" or not chip:
            raise _LeftOut(f"{HARDWARE_NOT_MAPPED}: unified-memory chip {named.strip()!r}")
        memory = node.get("unifiedMemoryGb", required=False).num(minimum=0) or _preset_memory(
            preset, chip
        )
        return apple_hardware(chip, memory)
    if kind == "CPU_ONLY":
        hardware = HardwareRecord(cpu=cpu, gpu="", gpu_count=0, os_name=os_name)
    elif kind == "DISCRETE_GPU":
        count = node.get("gpuCount", required=False).int(minimum=1) or 1
        per_card = node.get("vramGb", required=False).num(minimum=0)
        hardware = HardwareRecord(
            cpu=cpu,
            gpu=gpu_name(node.get("gpuName", required=False).str(), cpu=cpu),
            gpu_count=count,
            vram_gb=per_card * count if per_card else None,  # LocalMaxxing gives one card's
            os_name=os_name,
        )
        if not hardware.gpu:
            raise _LeftOut(f"{HARDWARE_NOT_MAPPED}: a GPU machine whose GPU is not named")
    else:
        raise _LeftOut(f"{HARDWARE_NOT_MAPPED}: hardware class {kind!r}")
    problem = hardware_problem(hardware)
    if problem:
        raise _LeftOut(problem)
    return hardware


def _concurrent(node: Node, command: Command) -> int:
    """How many requests the row had in flight at once: its `batchSize` where the command let
    the server decode several sequences together (LocalMaxxing's notes on such rows read
    "aggregate ... across C11 concurrent requests", "eight simultaneous HTTP requests"); else 1,
    as for llama-bench and one-slot servers, whose `batchSize` is the prompt batch (-b)."""
    requests = node.get("batchSize", required=False).int(minimum=0) or 1
    slots = command.value(*_SLOTS)
    if requests > 1 and slots.isdigit() and int(slots) > 1:
        return requests if str(requests) != command.value("-b", "--batch-size") else 1
    return 1


def _preset_memory(preset: str, chip: str) -> float | None:
    """The memory a preset's label gives ("Apple M4 Max (128 GB)"), for a row of that chip
    that does not give its own."""
    match = _PRESET_MEMORY.match(preset)
    if match and apple_chip(match.group(1)) == chip:
        return float(match.group(2))
    return None


def _speculation(flags: Node, command: Command) -> tuple[str, str]:
    """("mtp" | "ngram" | "draft" | "yes" | "", the draft model's id): what the row declares by
    its flags, or by a command that turns speculation on; the command also says which kind."""
    declared = bool(flags.get("specDecoding", required=False).bool()) or bool(
        flags.get("mtpEnabled", required=False).bool()
    )
    said = " ".join(
        command.value(name).lower()
        for name in ("--spec-type", "--speculative-config", "--speculative-model", "--spec-mode")
    ).strip()
    draft_file = command.value("-md", "--model-draft", "--draft", "--draft-model")
    # llama-server's --draft is a token count; hipfire's names the draft model's file.
    draft_file = "" if draft_file.isdigit() else re.split(r"[\\/]", draft_file)[-1]
    draft = model_id_and_quant(draft_file)[0] if draft_file else ""
    # A draft loaded alongside the model (-md) turns it on; a demo's --ar-baseline turns it off.
    enabled = bool(said and said != "none") or bool(command.value("-md", "--model-draft"))
    if "--ar-baseline" in command.options:
        enabled = False
    if not (declared or enabled):
        return "", ""
    if bool(flags.get("mtpEnabled", required=False).bool()) or "mtp" in said:
        return "mtp", draft
    if "ngram" in said:
        return "ngram", draft
    if draft or "eagle" in said or "draft" in said or "dflash" in command.tool:
        return "draft", draft
    return "yes", ""


def _settings(node: Node, model: Node, engine: Node, flags: Node, command: Command) -> JsonObject:
    """What the row says about how the model was run and on what workload: part of the
    stack's identity, so rows measured differently are not pooled."""
    moe = bool(model.get("isMoE", required=False).bool())
    depth = command.value("-d", "--n-depth") if command.tool == "llama-bench" else ""
    draft_n = command.value("--spec-draft-n-max", "--draft-max", "--draft-n", "--draft")
    tool = command.tool.removesuffix(".exe")
    revision = known(node.get("modelRevision", required=False).str())
    return {
        "tool": tool if tool in _TOOLS else None,
        "backend": known(engine.get("backend", required=False).str()).lower() or None,
        "flash_attn": flags.get("flashAttn", required=False).bool(default=None),
        "n_gpu_layers": flags.get("gpuLayers", required=False).int(minimum=-1),
        "tensor_parallel": flags.get("tensorParallel", required=False).int(minimum=0),
        "attention_backend": known(flags.get("attentionBackend", required=False).str()) or None,
        "batch_size": node.get("batchSize", required=False).int(minimum=0) or None,
        "prompt_tokens": node.get("promptTokens", required=False).int(minimum=0) or None,
        "output_tokens": node.get("outputTokens", required=False).int(minimum=0) or None,
        "depth": int(depth) if depth.isdigit() else None,
        "spec_draft_n": int(draft_n) if draft_n.isdigit() else None,
        "params_b": model.get("params", required=False).num(minimum=0) or None,
        "active_params_b": (model.get("activeParams", required=False).num(minimum=0) or None)
        if moe
        else None,
        "moe": True if moe else None,
        "model_revision": revision if revision and revision != "main" else None,
    }
