"""The bundle's ``sweeps`` block, built from the speed_sweep suite's cells, and the server facts
the sweeps size their requests by (context and slots)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..rules.contract import ConcurrencyCell, ConcurrencySweep, DepthCell, DepthSweep, Sweeps
from .errors import EngineError
from .providers.base import Provider
from .providers.ollama import OllamaProvider

if TYPE_CHECKING:
    from .plan import PreparedRun

SWEEP_SUITE = "speed_sweep"
DEPTH_METHOD = (
    "llama-bench -d: d context tokens are cached by a first request, once per depth (again "
    "only when the server's cached-token count shows it lost them), then each trial prefills "
    "p new tokens and decodes n on top of them"
)
# Ollama's num_ctx for the depth cells: room for the deepest cell the model holds, plus a margin
# (its context is sized from calibrated words, not counted tokens), in whole steps.
DEPTH_CONTEXT_MARGIN = 1.1
DEPTH_CONTEXT_STEP = 1024


def server_facts(prep: PreparedRun) -> dict[str, Any]:
    """The server's context (tokens per slot) and slot count, with where each came from.

    ``context_length`` is what every request of the run gets; ``depth_context`` what the depth
    cells get, larger on Ollama when the model holds more (``model_context``, from /api/show):
    one num_ctx for all of them, so Ollama reloads the model once for them, in the sweep's
    calibration, and once back, in the first concurrency level's warm-up round.
    """
    launch = {**prep.stack.launch, **prep.info.launch}
    facts: dict[str, Any] = {
        "kind": prep.info.kind,
        "context_length": None,
        "context_source": None,
        "depth_context": None,
        "depth_context_source": None,
        "model_context": None,
        "parallel_slots": None,
        "slots_source": None,
    }
    num_ctx = getattr(prep.provider, "num_ctx", None)
    if prep.provider.api == "ollama" and isinstance(num_ctx, int):
        facts.update(context_length=num_ctx, context_source="ollama num_ctx")
        model = prep.stack.model_context
        if model is not None:
            facts.update(
                model_context=model,
                depth_context=ollama_depth_context(num_ctx, model, prep.tasks.get(SWEEP_SUITE)),
                depth_context_source=f"ollama num_ctx (model context {model})",
            )
    elif isinstance(launch.get("context_length"), int):
        facts.update(context_length=launch["context_length"], context_source="server")
    if facts["depth_context"] is None:
        facts.update(depth_context=facts["context_length"])
        facts.update(depth_context_source=facts["context_source"])
    slots = launch.get("parallel_slots")
    if isinstance(slots, int) and slots > 0:
        facts.update(parallel_slots=slots, slots_source="llama.cpp /props total_slots")
    elif prep.info.kind == "llama.cpp":
        try:
            listing = prep.transport.get_json("/slots")
        except EngineError:
            listing = None
        if isinstance(listing, list) and listing:
            facts.update(parallel_slots=len(listing), slots_source="llama.cpp /slots")
    return facts


def ollama_depth_context(num_ctx: int, model: int, tasks: Sequence[dict] | None) -> int:
    """The num_ctx for every depth cell: room for the deepest one the model's context holds,
    capped at that context, and never below the run's own ``num_ctx`` (no reload for less)."""
    needs = [
        spec["depth"] + spec["prompt_tokens"] + spec["output_tokens"]
        for spec in (task["sweep"] for task in tasks or [])
        if spec["kind"] == "depth"
    ]
    deepest = max((need for need in needs if need <= model), default=0)
    room = math.ceil(deepest * DEPTH_CONTEXT_MARGIN / DEPTH_CONTEXT_STEP) * DEPTH_CONTEXT_STEP
    return max(num_ctx, min(model, room))


def depth_provider(prep: PreparedRun, facts: Mapping[str, Any]) -> Provider | None:
    """The run's provider with the depth cells' num_ctx, when that is not the run's own.

    It shares the run's connection (the depth cells send one request at a time, on the run's
    thread), so closing the run's provider closes it too.
    """
    provider, context = prep.provider, facts.get("depth_context")
    if not isinstance(provider, OllamaProvider) or context in (None, provider.num_ctx):
        return None
    return OllamaProvider(provider.transport, provider.model, num_ctx=context)


def sweeps_block(suites: Mapping[str, Any], trials: int | None) -> Sweeps | None:
    """``sweeps`` from the speed_sweep suite's task records; None when the run has none."""
    suite = suites.get(SWEEP_SUITE)
    if not isinstance(suite, Mapping):
        return None
    meta = suite.get("metadata") or {}
    server = meta.get("server") or {}
    depth: list[tuple[dict, dict]] = []
    concurrency: list[tuple[dict, dict]] = []
    for task in suite.get("tasks") or []:
        task_meta = task.get("metadata") or {}
        spec, cell = task_meta.get("sweep"), task_meta.get("cell")
        if not isinstance(spec, dict) or not isinstance(cell, dict):
            continue  # a cell that crashed: its task record carries the error
        (depth if spec.get("kind") == "depth" else concurrency).append((spec, cell))
    block = Sweeps()
    if depth:
        block["depth"] = DepthSweep(
            method=DEPTH_METHOD,
            prompt_tokens=int(depth[0][0]["prompt_tokens"]),
            output_tokens=int(depth[0][0]["output_tokens"]),
            trials=int(trials or 1),
            server_context=server.get("depth_context", server.get("context_length")),
            context_source=server.get("depth_context_source", server.get("context_source")),
            cells=[cast(DepthCell, cell) for _, cell in depth],
        )
    if concurrency:
        block["concurrency"] = ConcurrencySweep(
            prompt_tokens=int(concurrency[0][0]["prompt_tokens"]),
            output_tokens=int(concurrency[0][0]["output_tokens"]),
            server_slots=server.get("parallel_slots"),
            slots_source=server.get("slots_source"),
            cells=[cast(ConcurrencyCell, cell) for _, cell in concurrency],
        )
    return block or None


# What `benchloop info` prints for each figure of the sweeps (docs/metrics.md has the detail).
SWEEP_METRICS: dict[str, str] = {
    "depth": "tokens already in the server's context when the measured request starts",
    "depth_tokens": "the server's own count of the tokens it reused from its cache (cache_n)",
    "cache_held": "whether the cache held at least 90% of the context in every counted trial "
    "(the context is primed once per depth; a trial that found it lost is repeated after a "
    "re-prime, and the cell's note says how often)",
    "prompt_tokens (depth)": "new prompt tokens the server evaluated in the measured request",
    "prefill_tps (depth)": "new prompt tokens the server evaluated ÷ prefill window (response "
    "headers → first token), per trial, as in the speed suite",
    "decode_tps (depth)": "(N − 1) ÷ (last − first output token), N decoded with ignore_eos",
    "ttft_ms (depth)": "time from sending the measured request to its first output token",
    "server_context": "the context the depth cells ran with, and context_source where it came "
    "from: llama.cpp's per-slot n_ctx, or on Ollama the num_ctx sent for them (room for the "
    "deepest cell the model's own context holds); deeper cells are skipped",
    "streams": "requests sent at the same moment, each on its own connection",
    "aggregate_tps": "completion tokens of a round ÷ (last output token − first send), "
    "summed over the measured rounds (warm-up rounds excluded: the first level's, and any "
    "round the server reloaded the model in)",
    "aggregate_decode_tps": "tokens after each request's first ÷ (last output token − "
    "earliest first token): decode only, llama-benchy's total tg figure",
    "per_stream_tps": "each request's own decode rate, (N − 1) ÷ (last − first output token)",
    "ttft_p50_ms / ttft_tail_ms": "median and 99th percentile of TTFT over the level's "
    "requests; the tail is labelled max when fewer than 20",
    "server_slots": "the server's parallel slots (llama.cpp /props total_slots or /slots)",
}


# ------------------------------------------------------------------------------ token counts

# The depth cells' priming and the concurrency warm-ups: how the sweep ran before issue 35 (a
# fresh context request before every depth trial, a warm-up round at every level) and since.
METHODS = ("prime-once", "reprime")


def sweep_token_budget(
    tasks: Sequence[Mapping[str, Any]],
    trials: int,
    *,
    method: str = "prime-once",
    context: int | None = None,
) -> dict[str, int]:
    """The tokens the sweep's cells ask for at ``trials`` trials, from the suite's tasks
    (``SweepSuite.effective_tasks``): prompt tokens the server evaluates (its prefill work),
    tokens it generates, and requests. ``method`` "prime-once" is the sweep since issue 35,
    "reprime" the one before it. Cells a ``context`` of that many tokens cannot hold are left
    out, as the run skips them; the calibration's few one-token requests are not counted."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}")
    once = method == "prime-once"
    prompt = generated = requests = 0
    first_level = True
    for task in tasks:
        spec = task["sweep"]
        p, n = int(spec["prompt_tokens"]), int(spec["output_tokens"])
        if spec["kind"] == "depth":
            d = int(spec["depth"])
            if context is not None and d + p + n > context:
                continue
            primes = (1 if once else trials) if d > 0 else 0
            prompt += primes * d + trials * p
            generated += primes + trials * n
            requests += primes + trials
            continue
        c = int(spec["streams"])
        if context is not None and p + n > context:
            continue
        rounds = trials + (1 if first_level or not once else 0)
        first_level = False
        prompt += rounds * c * p
        generated += rounds * c * n
        requests += rounds * c
    return {"prompt_tokens": prompt, "generated_tokens": generated, "requests": requests}


def recorded_sweep_tokens(suite: Mapping[str, Any]) -> dict[str, Any]:
    """The tokens a run's sweep cost, from its ``speed_sweep`` suite record: every request's
    evaluated prompt tokens and generated tokens as the server counted them (measured trials,
    repeated ones, priming requests, warm-up rounds and the calibration).

    Records from before issue 35 kept neither the context requests nor the warm-up rounds:
    those are estimated (a context request of ``context_tokens`` per depth trial, a warm-up
    round like the level's average request) and ``estimated`` lists what was.
    """
    out: dict[str, Any] = {"prompt_tokens": 0, "generated_tokens": 0, "requests": 0}
    estimated: list[str] = []

    def add(prompt: object, generated: object) -> None:
        out["prompt_tokens"] += int(prompt) if isinstance(prompt, int | float) else 0
        out["generated_tokens"] += int(generated) if isinstance(generated, int | float) else 0
        out["requests"] += 1

    meta = suite.get("metadata") or {}
    for request in meta.get("calibration_requests") or []:
        add(request.get("evaluated_tokens"), request.get("completion_tokens"))
    for task in suite.get("tasks") or []:
        task_meta = task.get("metadata") or {}
        spec, trials = task_meta.get("sweep") or {}, task_meta.get("trials") or []
        for trial in trials:
            prime = trial.get("prime")
            if isinstance(prime, Mapping):
                if prime.get("ok"):
                    add(prime.get("evaluated_tokens"), prime.get("completion_tokens"))
            elif "prime" not in trial and trial.get("depth_target"):
                add(trial.get("context_tokens"), 1)
                if "depth context requests" not in estimated:
                    estimated.append("depth context requests")
            if trial.get("ok"):
                add(trial.get("prefill_tokens"), trial.get("completion_tokens"))
        if spec.get("kind") != "concurrency":
            continue
        if "warmups" in task_meta:
            for request in task_meta["warmups"]:
                if request.get("ok"):
                    add(request.get("prefill_tokens"), request.get("completion_tokens"))
        elif (good := [t for t in trials if t.get("ok")]) and spec.get("streams"):
            for _ in range(int(spec["streams"])):
                add(
                    sum(t.get("prefill_tokens") or 0 for t in good) / len(good),
                    sum(t.get("completion_tokens") or 0 for t in good) / len(good),
                )
            if "warm-up rounds" not in estimated:
                estimated.append("warm-up rounds")
    out["estimated"] = estimated
    return out
