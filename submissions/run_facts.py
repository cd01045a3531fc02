"""What a run says of itself that its speeds are judged by: the model's size and file (the
bundle's model block, an imported row's statements), how its GPUs split the model, what it
declares of speculative decoding, the prompt behind its TTFT and its depth-sweep cells.

submissions.integrity reads these; the arithmetic is runs.roofline's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runs import model_sizes, roofline
from runs.importers.records import RunRecord, as_json_value
from runs.models import Stack
from worker.rules.stats import median, summary_median

NOT_DECLARED = (None, "", False, "no", "off", "none")
SWEEP_SUITE = "speed_sweep"


@dataclass(frozen=True)
class Speculation:
    """Declared speculative decoding: its kind, draft length and acceptance where known."""

    kind: str
    draft_n: int | None = None
    acceptance: float | None = None


@dataclass(frozen=True)
class DepthCell:
    depth: int
    prompt_tokens: int | None
    decode_tps: float | None
    prefill_tps: float | None
    ttft_ms: float | None


@dataclass(frozen=True)
class Workload:
    """The prompt behind the run's TTFT and the depth cells it measured."""

    prompt_tokens: int | None = None
    cells: list[DepthCell] = field(default_factory=list)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return None
    return float(value)


def _model_block(payload: object) -> dict:
    payload = as_json_value(payload)
    model = payload.get("model") if isinstance(payload, dict) else None
    return model if isinstance(model, dict) else {}


def facts_of(stack: Stack, payload: object = None) -> roofline.RunFacts:
    """The run's facts from its bundle (`payload`, the stored raw payload) and its stack."""
    settings = stack.launch_settings or {}
    model = _model_block(payload)
    # The server's own count (llama.cpp's n_params, Ollama's parameter_size). An imported row's
    # statement is weaker: it counts only where neither the registry nor the name has a size
    # (integrity.ceilings_for), since rows have been seen giving the base model's size.
    params = model_sizes.parse_count(model.get("parameter_count"))
    source = "the server's parameter count" if params else ""
    size = model.get("file_size_bytes")
    kv = roofline.bits_per_weight(stack.kv_cache_type) if stack.kv_cache_type else None
    split, why = roofline.split_mode(settings, stack.engine)
    return roofline.RunFacts(
        params_b=params,
        params_source=source,
        active_b=_number(settings.get("active_params_b")),
        moe=settings.get("moe") is True,
        weights_bytes=int(weights) if (weights := _number(size)) else None,
        split=split,
        split_note=why,
        kv_bits=kv.bits if kv and not kv.assumed else 16.0,
    )


def speculation_of(stack: Stack, payload: object = None) -> Speculation | None:
    """What the stack declares of speculative decoding (a draft model, or the kind an engine
    or an imported row names), with the draft length and the acceptance the engine measured
    (llama.cpp's draft_n and draft_n_accepted, summed over the speed trials)."""
    settings = stack.launch_settings or {}
    kind = settings.get("speculative")
    if stack.draft_model:
        kind = f"draft {stack.draft_model}"
    elif kind in NOT_DECLARED:
        return None
    declared = _number(settings.get("spec_draft_n"))
    draft_n = int(declared) if declared else None
    drafted = accepted = 0
    for trial in _trials(payload):
        server = trial.get("server") if isinstance(trial, dict) else None
        if isinstance(server, dict) and _number(server.get("draft_n")):
            drafted += int(server["draft_n"])
            accepted += int(server.get("draft_n_accepted") or 0)
    acceptance = accepted / drafted if drafted else _number(settings.get("spec_acceptance"))
    text = "yes" if kind is True else str(kind)
    return Speculation(text, draft_n, min(acceptance, 1.0) if acceptance is not None else None)


def _trials(payload: object) -> list:
    payload = as_json_value(payload)
    suites = payload.get("suites") if isinstance(payload, dict) else None
    speed = suites.get("speed") if isinstance(suites, dict) else None
    tasks = speed.get("tasks") if isinstance(speed, dict) else None
    found = []
    for task in tasks if isinstance(tasks, list) else []:
        meta = task.get("metadata") if isinstance(task, dict) else None
        trials = meta.get("trials") if isinstance(meta, dict) else None
        found += trials if isinstance(trials, list) else []
    return found


def workload_of(record: RunRecord) -> Workload:
    """The speed suite's prompt (median over its tasks) and the measured depth cells."""
    prompt = _number((record.launch_settings or {}).get("prompt_tokens"))
    counts = [
        task.tokens_prompt
        for suite in record.suites
        if suite.suite == "speed"
        for task in suite.tasks
        if task.tokens_prompt
    ]
    if counts:
        prompt = median(counts)
    cells = []
    for suite in record.suites:
        if suite.suite != SWEEP_SUITE:
            continue
        for task in suite.tasks:
            cell = as_json_value(task.metadata).get("cell") if task.metadata else None
            if isinstance(cell, dict) and cell.get("status") == "measured" and "depth" in cell:
                cells.append(
                    DepthCell(
                        depth=int(cell.get("depth") or 0),
                        prompt_tokens=int(cell["prompt_tokens"])
                        if _number(cell.get("prompt_tokens"))
                        else None,
                        decode_tps=_number(summary_median(cell.get("decode_tps"))),
                        prefill_tps=_number(summary_median(cell.get("prefill_tps"))),
                        ttft_ms=_number(summary_median(cell.get("ttft_ms"))),
                    )
                )
    return Workload(int(prompt) if prompt else None, cells)
