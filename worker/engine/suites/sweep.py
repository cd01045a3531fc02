"""speed_sweep: speed at context depth and under concurrent streams (see docs/metrics.md).

Depth, in the manner of ``llama-bench -d``: a first request puts d tokens in the server's
context (a fresh nonce at its start, so nothing of another cell can be reused), once per cell;
each measured request keeps that context, adds p new prompt tokens (after a reply that opens with
the trial's own nonce, so nothing of an earlier trial is reused) and decodes n. The context is
primed again only when a request's cached-token count shows the server lost it. Concurrency: c
streams at once, each on its own connection, a warm-up round first at the first level and after
a reload. Cells are measured, never scored (worker.rules.scoring.MEASURED_ONLY); the bundle's
``sweeps`` block is built from them (worker.engine.sweeps).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...rules.contract import TaskRecord, TrialCompleted
from ...rules.reasoning import OutputLimits
from ...rules.stats import median, summarize
from ..errors import EngineError
from ..metrics import request_metrics
from ..providers.base import ChatRequest, ChatResponse, Provider
from .base import RunContext, Suite, task_record
from .prompts import filler, new_nonce, speed_messages
from .speed import (
    CALIBRATION_WORDS,
    FALLBACK_BASE_TOKENS,
    FALLBACK_TOKENS_PER_WORD,
    calibrate,
    progress_callback,
)
from .sweep_rounds import concurrency_cell, reload_reason, round_rates, run_round

SUITE = "speed_sweep"
# The cache holds the depth when the server reused at least this share of the context tokens.
CACHE_HELD_SHARE = 0.9
# A depth cell's priming: once (re-primed when the cache is lost), or before every trial with a
# fresh context (the method before issue 35; kept to compare the two on one server).
PRIME_ONCE, PRIME_EVERY_TRIAL = "once", "every-trial"
FIRST_PRIME = "first trial at this depth"
# Re-primes per depth cell: past them a trial that finds the cache lost counts as it is (a
# server that keeps no cache would otherwise repeat every trial).
MAX_REPRIMES = 2
# Extra rounds per concurrency level that a reload may cost; past them a round counts as it is.
MAX_RELOAD_ROUNDS = 2
FIRST_LEVEL = "first concurrency level of the run"


def _context_turn(nonce: str, words: int) -> dict[str, str]:
    """The d tokens already in context: a first user turn that opens with the nonce."""
    parts = [f"Request {nonce}.", "Notes from the harbour office:", filler(words, 3)]
    parts.append("Keep these notes in mind; a question follows.")
    return {"role": "user", "content": "\n\n".join(p for p in parts if p)}


def _ack(nonce: str) -> dict[str, str]:
    """The short reply after the context. It opens with the trial's own nonce: the server's
    cache can serve the context, never an earlier trial's reply and question."""
    return {"role": "assistant", "content": f"{nonce}: noted."}


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
        # Kept for the sweep's token count (worker.engine.sweeps.recorded_sweep_tokens).
        ctx.suite_metadata.setdefault("calibration_requests", []).append(request_tokens(response))
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
        after = self._count(ctx, [context, _ack(new_nonce()), _question_turn(0, instruction)])
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
        new_words = self._words(ctx, p - (over["question"] if depth else over["depth0"]))
        every_trial = spec.get("priming", PRIME_ONCE) == PRIME_EVERY_TRIAL
        cache = _DepthCache(depth, self._words(ctx, depth - base)) if depth else None
        trials: list[dict] = []
        index = 1
        while index <= ctx.trials:
            ctx.check_stop()
            if cache is not None and (cache.due is None and every_trial):
                cache.renew("the method primes before every trial")
            try:
                trial = self._depth_trial(ctx, task, index, cache, new_words, n)
            except EngineError as exc:
                trial = {"trial_index": index, "ok": False, "counted": True, "error": exc.message}
                trial["error_kind"] = exc.kind
                if cache is not None:
                    trial["prime"] = cache.taken
                    # A request that failed may have been a restart: check the cache again.
                    cache.due = cache.due or f"the previous request failed ({exc.kind})"
                if exc.kind == "context_overflow":
                    reason = f"the server refused the context: {exc.message[:200]}"
                    return self._record(task, _skipped("depth", depth, reason), [*trials, trial])
            trials.append(trial)
            if trial["counted"]:
                self._trial_event(ctx, task, index, trial)
                index += 1
        return self._record(task, _depth_cell(depth, trials), trials)

    def _depth_trial(
        self,
        ctx: RunContext,
        task: dict,
        index: int,
        cache: _DepthCache | None,
        new_words: int,
        n: int,
    ) -> dict[str, Any]:
        """The measured request on top of the cell's context, primed first where it is due."""
        nonce = new_nonce()
        instruction = task["sweep"]["instruction"]
        provider = _depth_provider(ctx)
        if cache is not None:
            cache.prime(provider)
            messages = [cache.context, _ack(nonce), _question_turn(new_words, instruction)]
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
        trial: dict[str, Any] = {
            "trial_index": index,
            "ok": True,
            "counted": True,
            "nonce": nonce,
            "depth_target": cache.depth if cache else 0,
            "context_tokens": cache.tokens if cache else 0,
            "depth_tokens": held_n,
            "cache_held": None,
            "prime": cache.taken if cache else None,
            "reprimed": bool(cache and cache.taken and cache.taken["reason"] != FIRST_PRIME),
            **metrics,
        }
        if cache is None:
            return trial
        trial["context_nonce"] = cache.nonce
        if held_n is None:
            # A server that counts no cached tokens (Ollama before prompt_eval_cached_count)
            # leaves the context's share of its prompt count unknown: no prefill rather than
            # one that counts d cached tokens as prefilled; and no sign of a lost cache.
            trial["prefill_tps"] = None
            trial["prefill_note"] = (
                "not measured: the server reports no cached-token count, so the tokens it "
                "evaluated on top of the context are unknown"
            )
        elif cache.tokens:
            trial["cache_held"] = held_n >= CACHE_HELD_SHARE * cache.tokens
            if not trial["cache_held"]:
                cache.lost(trial, held_n)
        return trial

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
        warmups: list[dict] = []
        # A warm-up round where one is needed: at the run's first level (connections, the
        # model's first batches, Ollama's reload back from the depth cells' num_ctx) ...
        warmup: str | None = None if ctx.suite_metadata.get("warmups") else FIRST_LEVEL
        reloads = 0
        try:
            with ThreadPoolExecutor(max_workers=streams) as pool:
                measured = 0
                while measured < ctx.trials:
                    ctx.check_stop()
                    batch = run_round(pool, providers, task, measured + 1, words, n, warmup)
                    # ... and after a reload: a round the server loaded the model in is one.
                    reload = reload_reason(batch)
                    if warmup is None and reload and reloads < MAX_RELOAD_ROUNDS:
                        reloads += 1
                        warmup = reload
                        for request in batch:
                            request.update(warmup=True, warmup_reason=reload)
                    if warmup is not None:
                        warmups.extend(batch)
                        ctx.suite_metadata.setdefault("warmups", []).append(
                            {"task_id": task["id"], "streams": streams, "reason": warmup}
                        )
                        warmup = None
                        continue
                    measured += 1
                    results.extend(batch)
                    good = [r for r in batch if r["ok"]]
                    self._trial_event(
                        ctx,
                        task,
                        measured,
                        {
                            "ok": bool(good),
                            "decode_tps": round_rates(good)["aggregate_decode_tps"],
                            "ttft_ms": median([r["ttft_ms"] for r in good], digits=4),
                            "prefill_tps": None,
                        },
                    )
        finally:
            if providers[0] is not ctx.provider:
                for provider in providers:
                    provider.close()
        record = self._record(task, concurrency_cell(streams, results), results)
        record["metadata"]["warmups"] = warmups
        return record

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
        good = [t for t in trials if t.get("ok") and t.get("counted", True)]
        return task_record(
            task,
            self.name,
            # A cell the server's context cannot hold is capped by design, not a failure.
            passed=status != "failed",
            score=None,  # measured, never scored (scoring.MEASURED_ONLY)
            latency_ms=median([t.get("e2e_ms") for t in good], digits=4) or 0.0,
            tokens_generated=int(median([t.get("completion_tokens") for t in good], digits=4) or 0),
            tokens_prompt=int(median([t.get("prompt_tokens") for t in good], digits=4) or 0),
            error=error[:500],
            execution_ok=status != "failed",
            finish_reason=good[-1].get("finish_reason") if good else None,
            metadata={"sweep": dict(task["sweep"]), "cell": cell, "trials": trials},
        )


def _depth_provider(ctx: RunContext) -> Provider:
    return ctx.depth_provider or ctx.provider


class _DepthCache:
    """A depth cell's context in the server's cache: primed before the cell's first trial, and
    again only when it is due (a trial found the cache lost, or a request failed)."""

    def __init__(self, depth: int, words: int) -> None:
        self.depth, self.words = depth, words
        self.nonce = new_nonce()
        self.context = _context_turn(self.nonce, words)
        # Why the next trial primes first; None: the cache is taken to hold the context.
        self.due: str | None = FIRST_PRIME
        # The priming request just before the current trial (its record), if there was one.
        self.taken: dict[str, Any] | None = None
        # The last priming request's prompt tokens: the context, as the server counts it.
        self.tokens: int | None = None
        self.reprimes = 0

    def renew(self, reason: str) -> None:
        """A fresh context (new nonce) to prime: nothing of the last one can be reused."""
        self.nonce = new_nonce()
        self.context = _context_turn(self.nonce, self.words)
        self.due = reason

    def prime(self, provider: Provider) -> None:
        """Put the context in the server's cache when that is due (one decoded token)."""
        self.taken = None
        if self.due is None:
            return
        record: dict[str, Any] = {"reason": self.due, "ok": False}
        self.taken, self.due = record, None
        try:
            response = provider.chat_stream(
                ChatRequest(messages=[self.context], max_tokens=1, temperature=0.0)
            )
        except EngineError as exc:
            record["error"] = exc.message[:300]
            self.due = f"the priming request failed ({exc.kind})"
            raise
        record.update(ok=True, **request_tokens(response))
        self.tokens = response.prompt_tokens

    def lost(self, trial: dict[str, Any], held: int) -> None:
        """The trial's request found the context gone: it re-evaluated it, so it is repeated
        after a re-prime, while re-primes are left; past them it counts as it is."""
        why = (
            f"the server reused {held} of the context's {self.tokens} tokens: its cache had "
            "lost the context, so this request evaluated it again"
        )
        if self.reprimes >= MAX_REPRIMES:
            trial["cache_note"] = f"{why}; counted (no re-primes left in this cell)"
            return
        self.reprimes += 1
        trial["counted"] = False
        trial["excluded"] = f"{why}; not counted, repeated after a re-prime"
        self.due = f"the previous request found the cache lost ({held} of {self.tokens} reused)"


def request_tokens(response: ChatResponse) -> dict[str, int | None]:
    """A request's token counts as the server gave them: its whole prompt, the part it
    evaluated (llama.cpp's prompt_n, else prompt − cached), the cached part and the output."""
    server = response.server
    cached = server.cache_n if server and server.cache_n is not None else response.cached_tokens
    evaluated = server.prompt_n if server and server.prompt_n is not None else None
    if evaluated is None and response.prompt_tokens is not None:
        evaluated = max(response.prompt_tokens - (cached or 0), 0)
    return {
        "prompt_tokens": response.prompt_tokens,
        "evaluated_tokens": evaluated,
        "cached_tokens": cached,
        "completion_tokens": response.completion_tokens,
    }


def _skipped(key: str, level: int, reason: str) -> dict[str, Any]:
    return {key: level, "status": "skipped", "reason": reason}


def _depth_cell(depth: int, trials: list[dict]) -> dict[str, Any]:
    """The cell's figures over its counted trials (a trial that found the cache lost and was
    repeated is kept in the record, not in the figures)."""
    good = [t for t in trials if t.get("ok") and t.get("counted", True)]
    if not good:
        reason = next((t["error"] for t in trials if t.get("error")), "every trial failed")
        return {"depth": depth, "status": "failed", "reason": str(reason)[:300]}
    held = [t["cache_held"] for t in good if t["cache_held"] is not None]
    depth_n = median([t["depth_tokens"] for t in good], digits=4)
    cell: dict[str, Any] = {
        "depth": depth,
        "status": "measured",
        "n": len(good),
        "depth_tokens": int(depth_n) if depth_n is not None else None,
        "context_tokens": int(median([t["context_tokens"] for t in good], digits=4) or 0),
        "cache_held": all(held) if held else None,
        "prompt_tokens": int(median([t["prefill_tokens"] for t in good], digits=4) or 0),
        "token_count_source": "server"
        if all(t["prefill_tokens_source"] == "server" for t in good)
        else "estimated",
        "prefill_tps": summarize(t["prefill_tps"] for t in good),
        "decode_tps": summarize(t["decode_tps"] for t in good),
        "ttft_ms": summarize((t["ttft_ms"] for t in good), higher_is_better=False),
    }
    notes = []
    repeated = sum(1 for t in trials if t.get("excluded"))
    if repeated:
        notes.append(
            f"the server lost the cached context {repeated} time(s): re-primed, and each "
            "trial that found it lost was repeated (not counted)"
        )
    if held and not all(held):
        notes.append(
            f"the server's cache did not hold the context in {held.count(False)} of "
            f"{len(held)} counted trials: their prefill re-evaluated it"
        )
    if notes:
        cell["note"] = "; ".join(notes)
    return cell
