"""speed_sweep: speed at context depth and under concurrent streams (see docs/metrics.md).

Depth, in the manner of ``llama-bench -d``: a first request puts d tokens in the server's
context (a fresh nonce at its start, so nothing of another cell or trial can be reused), then
the measured request keeps that context, adds p new prompt tokens and decodes n. Concurrency:
c streams at once, each on its own connection, a warm-up round first at every level. Cells are
measured, never scored (worker.engine.scoring.MEASURED_ONLY); the bundle's ``sweeps`` block is
built from them (worker.engine.sweeps).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...contract import TaskRecord, TrialCompleted
from ..errors import EngineError
from ..metrics import request_metrics
from ..providers.base import ChatRequest, Provider
from ..reasoning import OutputLimits
from ..stats import percentile, summarize
from .base import RunContext, Suite, task_record
from .prompts import filler, new_nonce, speed_messages
from .speed import (
    CALIBRATION_WORDS,
    FALLBACK_BASE_TOKENS,
    FALLBACK_TOKENS_PER_WORD,
    calibrate,
    progress_callback,
)

SUITE = "speed_sweep"
# The cache holds the depth when the server reused at least this share of the context tokens.
CACHE_HELD_SHARE = 0.9
# Below this many samples the TTFT tail is the maximum, not a 99th percentile.
P99_MIN_SAMPLES = 20
BARRIER_TIMEOUT_S = 60.0
ACK = {"role": "assistant", "content": "Noted."}


def _context_turn(nonce: str, words: int) -> dict[str, str]:
    """The d tokens already in context: a first user turn that opens with the nonce."""
    parts = [f"Request {nonce}.", "Notes from the harbour office:", filler(words, 3)]
    parts.append("Keep these notes in mind; a question follows.")
    return {"role": "user", "content": "\n\n".join(p for p in parts if p)}


def _question_turn(words: int, instruction: str) -> dict[str, str]:
    """The p new tokens of the measured request, after the context and its reply."""
    parts = ["More notes from the same week:", filler(words, 40), instruction]
    return {"role": "user", "content": "\n\n".join(p for p in parts if p)}


def parse_levels(text: str, *, minimum: int) -> list[int]:
    """``"0,4096,16384"`` → [0, 4096, 16384]; ValueError for anything else."""
    values = sorted({int(part) for part in text.split(",") if part.strip()})
    if not values or values[0] < minimum:
        raise ValueError(f"expected comma-separated integers of at least {minimum}")
    return values


class SweepSuite(Suite):
    """Depth cells and concurrency cells, from the data file or the run's ``--depths`` and
    ``--concurrency`` (then the run is not comparable with the profile's own cells)."""

    # Its output lengths define what it measures: --max-tokens only lowers them, no budget.
    thinks = False

    def effective_tasks(
        self, limits: OutputLimits | None = None, options: Mapping[str, Any] | None = None
    ) -> list[dict]:
        tasks = super().effective_tasks(limits)
        options = options or {}
        by_kind = {
            "depth": [t for t in tasks if t["sweep"]["kind"] == "depth"],
            "concurrency": [t for t in tasks if t["sweep"]["kind"] == "concurrency"],
        }
        for kind, key, name in (
            ("depth", "depths", "depth"),
            ("concurrency", "concurrency", "streams"),
        ):
            levels = options.get(key)
            if levels is None or not by_kind[kind]:
                continue
            template = by_kind[kind][0]
            by_kind[kind] = [
                {
                    **template,
                    "id": f"sweep-{kind}-{level}",
                    "title": f"{kind} {level}",
                    "sweep": {**template["sweep"], name: level},
                }
                for level in levels
            ]
        out = by_kind["depth"] + by_kind["concurrency"]
        for task in out:
            spec = dict(task["sweep"])
            if options.get("prompt_tokens"):
                spec["prompt_tokens"] = int(options["prompt_tokens"])
            if options.get("output_tokens"):
                spec["output_tokens"] = int(options["output_tokens"])
            if limits is not None and limits.max_tokens is not None:
                # Like the speed suite's lengths: --max-tokens only lowers them.
                spec["output_tokens"] = min(spec["output_tokens"], max(2, limits.max_tokens))
            task["sweep"] = spec
        return out

    def prepare(self, ctx: RunContext) -> None:
        """Two excluded requests that measure the context turn's overhead and tokens per word."""
        counts = [self._count(ctx, [_context_turn(new_nonce(), w)]) for w in (0, CALIBRATION_WORDS)]
        calibrated, base_tokens, per_word = calibrate(*counts)
        ctx.suite_metadata["calibration"] = {
            "calibrated": calibrated,
            "context_base_tokens": base_tokens,
            "tokens_per_word": per_word,
            "overheads": {},
        }
        ctx.suite_metadata["server"] = dict(ctx.server)

    def _count(self, ctx: RunContext, messages: list[dict]) -> int | None:
        """The server's prompt-token count for these messages (one excluded token decoded).

        On the depth cells' provider: where that one's context differs (Ollama's num_ctx), the
        server reloads the model for the calibration, an excluded request, before any cell.
        """
        try:
            response = _depth_provider(ctx).chat_stream(
                ChatRequest(messages=messages, max_tokens=1, temperature=0.0)
            )
        except EngineError:
            return None
        return response.prompt_tokens

    def _overheads(self, ctx: RunContext, instruction: str) -> dict[str, float]:
        """Prompt tokens around the filler for this instruction: at depth 0 and after a context."""
        calib = ctx.suite_metadata["calibration"]
        known = calib["overheads"].get(instruction)
        if known is not None:
            return known
        nonce = new_nonce()
        alone = self._count(ctx, speed_messages(nonce, instruction, 0))
        context = _context_turn(nonce, 0)
        after = self._count(ctx, [context, ACK, _question_turn(0, instruction)])
        base = calib["context_base_tokens"] if calib["calibrated"] else None
        words = len(instruction.split())
        estimate = FALLBACK_BASE_TOKENS + words * FALLBACK_TOKENS_PER_WORD
        out = {
            "depth0": float(alone) if alone else estimate,
            # The new turn's own tokens: the reply, the question and the generation prompt.
            "question": float(after - base)
            if after and base is not None and after > base
            else 12 + words * 1.35,
        }
        calib["overheads"][instruction] = out
        return out

    def _words(self, ctx: RunContext, tokens: float) -> int:
        per_word = ctx.suite_metadata["calibration"]["tokens_per_word"]
        return max(0, round(tokens / per_word))

    def score(self, records: list[TaskRecord]) -> float | None:
        """None: the sweep measures speed; it has no score, and adds to none."""
        return None

    def run_task(self, task: dict, ctx: RunContext) -> TaskRecord:
        if task["sweep"]["kind"] == "depth":
            return self._depth(task, ctx)
        return self._concurrency(task, ctx)

    # ------------------------------------------------------------------ depth

    def _depth(self, task: dict, ctx: RunContext) -> TaskRecord:
        spec = task["sweep"]
        depth, p, n = spec["depth"], spec["prompt_tokens"], spec["output_tokens"]
        # Where the cells' context is sized to the model's (Ollama's num_ctx), that is the limit.
        model = ctx.server.get("model_context")
        limit = model or ctx.server.get("depth_context", ctx.server.get("context_length"))
        if isinstance(limit, int) and limit > 0 and depth + p + n > limit:
            reason = f"exceeds the {'model' if model else 'server'}'s context ({limit} tokens)"
            return self._record(task, _skipped("depth", depth, reason), [])
        over = self._overheads(ctx, spec["instruction"])
        base = ctx.suite_metadata["calibration"]["context_base_tokens"]
        depth_words = self._words(ctx, depth - base)
        new_words = self._words(ctx, p - (over["question"] if depth else over["depth0"]))
        trials: list[dict] = []
        for index in range(1, ctx.trials + 1):
            ctx.check_stop()
            try:
                trial = self._depth_trial(ctx, task, index, depth, depth_words, new_words, n)
            except EngineError as exc:
                trial = {"trial_index": index, "ok": False, "error": exc.message}
                trial["error_kind"] = exc.kind
                if exc.kind == "context_overflow":
                    reason = f"the server refused the context: {exc.message[:200]}"
                    return self._record(task, _skipped("depth", depth, reason), [*trials, trial])
            trials.append(trial)
            self._trial_event(ctx, task, index, trial)
        return self._record(task, _depth_cell(depth, trials), trials)

    def _depth_trial(
        self,
        ctx: RunContext,
        task: dict,
        index: int,
        depth: int,
        depth_words: int,
        new_words: int,
        n: int,
    ) -> dict[str, Any]:
        """One load request (not measured) and the measured request on top of its context."""
        nonce = new_nonce()
        instruction = task["sweep"]["instruction"]
        provider = _depth_provider(ctx)
        context_tokens: int | None = 0
        if depth > 0:
            context = _context_turn(nonce, depth_words)
            loaded = provider.chat_stream(
                ChatRequest(messages=[context], max_tokens=1, temperature=0.0)
            )
            context_tokens = loaded.prompt_tokens
            messages = [context, ACK, _question_turn(new_words, instruction)]
        else:
            messages = speed_messages(nonce, instruction, new_words)
        response = provider.chat_stream(
            ChatRequest(messages=messages, max_tokens=n, temperature=0.0, ignore_eos=True),
            on_chunk=progress_callback(ctx, SUITE, task["id"], index),
        )
        metrics = request_metrics(response)
        server = metrics["server"] or {}
        held_n = server.get("cache_n")
        if held_n is None:
            held_n = response.cached_tokens
        held: bool | None = None
        if depth > 0 and held_n is not None and context_tokens:
            held = held_n >= CACHE_HELD_SHARE * context_tokens
        if depth > 0 and held_n is None:
            # A server that counts no cached tokens (Ollama before prompt_eval_cached_count)
            # leaves the context's share of its prompt count unknown: no prefill rather than
            # one that counts d cached tokens as prefilled.
            metrics["prefill_tps"] = None
            metrics["prefill_note"] = (
                "not measured: the server reports no cached-token count, so the tokens it "
                "evaluated on top of the context are unknown"
            )
        return {
            "trial_index": index,
            "ok": True,
            "nonce": nonce,
            "depth_target": depth,
            "context_tokens": context_tokens,
            "depth_tokens": held_n,
            "cache_held": held,
            **metrics,
        }

    # ------------------------------------------------------------ concurrency

    def _concurrency(self, task: dict, ctx: RunContext) -> TaskRecord:
        spec = task["sweep"]
        streams, p, n = spec["streams"], spec["prompt_tokens"], spec["output_tokens"]
        limit = ctx.server.get("context_length")
        if isinstance(limit, int) and limit > 0 and p + n > limit:
            reason = f"a request exceeds the server's context ({limit} tokens)"
            return self._record(task, _skipped("streams", streams, reason), [])
        if streams > 1 and ctx.new_provider is None:
            reason = "no separate connection per stream in this run"
            return self._record(task, _skipped("streams", streams, reason), [])
        words = self._words(ctx, p - self._overheads(ctx, spec["instruction"])["depth0"])
        providers: list[Provider] = [ctx.provider]
        if streams > 1 and ctx.new_provider is not None:
            providers = [ctx.new_provider() for _ in range(streams)]
        results: list[dict] = []
        try:
            with ThreadPoolExecutor(max_workers=streams) as pool:
                for round_index in range(ctx.trials + 1):
                    ctx.check_stop()
                    batch = _round(pool, providers, task, ctx, round_index, words, n)
                    if round_index == 0:
                        continue  # the level's warm-up round: excluded
                    results.extend(batch)
                    good = [r for r in batch if r["ok"]]
                    self._trial_event(
                        ctx,
                        task,
                        round_index,
                        {
                            "ok": bool(good),
                            "decode_tps": _round_rates(good)["aggregate_decode_tps"],
                            "ttft_ms": _median([r["ttft_ms"] for r in good]),
                            "prefill_tps": None,
                        },
                    )
        finally:
            if providers[0] is not ctx.provider:
                for provider in providers:
                    provider.close()
        return self._record(task, _concurrency_cell(streams, results), results)

    # ---------------------------------------------------------------- records

    def _trial_event(self, ctx: RunContext, task: dict, index: int, trial: dict) -> None:
        ok = bool(trial.get("ok"))
        event = TrialCompleted(
            type="trial_completed", suite=SUITE, task_id=task["id"], trial=index, ok=ok
        )
        if ok:
            event["decode_tps"] = trial.get("decode_tps")
            event["ttft_ms"] = trial.get("ttft_ms")
            event["prefill_tps"] = trial.get("prefill_tps")
        ctx.emit(event)

    def _record(self, task: dict, cell: dict[str, Any], trials: list[dict]) -> TaskRecord:
        status = cell["status"]
        failed = [t for t in trials if not t.get("ok")]
        error = ""
        if status == "failed":
            error = str(cell.get("reason", "every request failed"))
        elif failed:
            error = f"{len(failed)}/{len(trials)} requests failed: {failed[0].get('error', '')}"
        good = [t for t in trials if t.get("ok")]
        return task_record(
            task,
            self.name,
            # A cell the server's context cannot hold is capped by design, not a failure.
            passed=status != "failed",
            score=None,  # measured, never scored (scoring.MEASURED_ONLY)
            latency_ms=_median([t.get("e2e_ms") for t in good]) or 0.0,
            tokens_generated=int(_median([t.get("completion_tokens") for t in good]) or 0),
            tokens_prompt=int(_median([t.get("prompt_tokens") for t in good]) or 0),
            error=error[:500],
            execution_ok=status != "failed",
            finish_reason=good[-1].get("finish_reason") if good else None,
            metadata={"sweep": dict(task["sweep"]), "cell": cell, "trials": trials},
        )


def _depth_provider(ctx: RunContext) -> Provider:
    return ctx.depth_provider or ctx.provider


def _skipped(key: str, level: int, reason: str) -> dict[str, Any]:
    return {key: level, "status": "skipped", "reason": reason}


def _median(values: list) -> float | None:
    clean = sorted(v for v in values if v is not None)
    return round(percentile(clean, 0.5), 4) if clean else None


def _depth_cell(depth: int, trials: list[dict]) -> dict[str, Any]:
    good = [t for t in trials if t.get("ok")]
    if not good:
        reason = next((t["error"] for t in trials if t.get("error")), "every trial failed")
        return {"depth": depth, "status": "failed", "reason": str(reason)[:300]}
    held = [t["cache_held"] for t in good if t["cache_held"] is not None]
    depth_n = _median([t["depth_tokens"] for t in good])
    cell: dict[str, Any] = {
        "depth": depth,
        "status": "measured",
        "n": len(good),
        "depth_tokens": int(depth_n) if depth_n is not None else None,
        "context_tokens": int(_median([t["context_tokens"] for t in good]) or 0),
        "cache_held": all(held) if held else None,
        "prompt_tokens": int(_median([t["prefill_tokens"] for t in good]) or 0),
        "token_count_source": "server"
        if all(t["prefill_tokens_source"] == "server" for t in good)
        else "estimated",
        "prefill_tps": summarize(t["prefill_tps"] for t in good),
        "decode_tps": summarize(t["decode_tps"] for t in good),
        "ttft_ms": summarize((t["ttft_ms"] for t in good), higher_is_better=False),
    }
    if held and not all(held):
        cell["note"] = (
            f"the server's cache did not hold the context in {held.count(False)} of "
            f"{len(held)} trials: their prefill re-evaluated it"
        )
    return cell


def _round(
    pool: ThreadPoolExecutor,
    providers: list[Provider],
    task: dict,
    ctx: RunContext,
    round_index: int,
    words: int,
    n: int,
) -> list[dict]:
    """One round: every stream sends at the same moment (a barrier), each on its connection."""
    barrier = threading.Barrier(len(providers), timeout=BARRIER_TIMEOUT_S)
    origin = time.perf_counter()
    instruction = task["sweep"]["instruction"]

    def one(stream: int) -> dict[str, Any]:
        nonce = new_nonce()
        request = ChatRequest(
            messages=speed_messages(nonce, instruction, words),
            max_tokens=n,
            temperature=0.0,
            ignore_eos=True,
        )
        providers[stream].ready()  # any warm-up request now, so every prompt leaves together
        barrier.wait()
        sent = time.perf_counter() - origin
        base = {
            "trial_index": (round_index - 1) * len(providers) + stream + 1,
            "round": round_index,
            "stream": stream,
            "nonce": nonce,
            "warmup": round_index == 0,
        }
        try:
            # No live progress from these threads: listeners (a lab job's event stream) expect
            # events from the run's own thread; each round reports when it ends.
            response = providers[stream].chat_stream(request)
        except EngineError as exc:
            return {**base, "ok": False, "error": exc.message, "error_kind": exc.kind}
        metrics = request_metrics(response)
        ttft, e2e = metrics["ttft_ms"], metrics["e2e_ms"]
        return {
            **base,
            "ok": ttft is not None and e2e is not None,
            "sent_s": round(sent, 6),
            "first_s": round(sent + ttft / 1000.0, 6) if ttft is not None else None,
            "last_s": round(sent + e2e / 1000.0, 6) if e2e is not None else None,
            **metrics,
        }

    futures = [pool.submit(one, stream) for stream in range(len(providers))]
    return [future.result() for future in futures]


def _round_rates(good: list[dict]) -> dict[str, float | None]:
    """A round's aggregate rates over its successful requests.

    aggregate = completion tokens ÷ (last output token − first send); aggregate_decode = tokens
    after each request's first ÷ (last output token − first first token), llama-benchy's figure.
    """
    if not good:
        return dict.fromkeys(
            ("tokens", "window_s", "decode_tokens", "decode_window_s", "aggregate_tps"),
            None,
        ) | {"aggregate_decode_tps": None}
    last = max(r["last_s"] for r in good)
    window = last - min(r["sent_s"] for r in good)
    decode_window = last - min(r["first_s"] for r in good)
    tokens = sum(r["completion_tokens"] for r in good)
    decode_tokens = sum(max(r["completion_tokens"] - 1, 0) for r in good)
    return {
        "tokens": tokens,
        "window_s": window,
        "decode_tokens": decode_tokens,
        "decode_window_s": decode_window,
        "aggregate_tps": tokens / window if window > 0 else None,
        "aggregate_decode_tps": decode_tokens / decode_window if decode_window > 0 else None,
    }


def _concurrency_cell(streams: int, results: list[dict]) -> dict[str, Any]:
    good = [r for r in results if r["ok"]]
    if not good:
        reason = next((r["error"] for r in results if r.get("error")), "every request failed")
        return {"streams": streams, "status": "failed", "reason": str(reason)[:300]}
    indexes = sorted({r["round"] for r in good})
    rounds = [_round_rates([r for r in good if r["round"] == i]) for i in indexes]
    rounds = [r for r in rounds if r["aggregate_tps"] is not None]
    window = sum(r["window_s"] or 0.0 for r in rounds)
    decode_window = sum(r["decode_window_s"] or 0.0 for r in rounds)
    ttft = sorted(r["ttft_ms"] for r in good)
    tail_label = "p99" if len(ttft) >= P99_MIN_SAMPLES else "max"
    tokens = sum(r["tokens"] or 0 for r in rounds)
    decode_tokens = sum(r["decode_tokens"] or 0 for r in rounds)
    return {
        "streams": streams,
        "status": "measured",
        "requests": len(good),
        "failed_requests": len(results) - len(good),
        "rounds": len(rounds),
        "aggregate_tps": round(tokens / window, 3) if window > 0 else None,
        "aggregate_decode_tps": round(decode_tokens / decode_window, 3)
        if decode_window > 0
        else None,
        "aggregate_rounds_tps": summarize(r["aggregate_tps"] for r in rounds),
        "per_stream_tps": summarize(r["decode_tps"] for r in good),
        "ttft_ms": summarize(ttft, higher_is_better=False),
        "ttft_p50_ms": round(percentile(ttft, 0.5), 3),
        "ttft_tail_ms": round(percentile(ttft, 0.99) if tail_label == "p99" else ttft[-1], 3),
        "ttft_tail_label": tail_label,
        "wall_s": round(window, 3),
    }
