"""The speed suite: streamed trials at fixed prompt and output lengths (see docs/metrics.md)."""

from __future__ import annotations

import time
from collections.abc import Callable

from ...rules.contract import TaskProgress, TaskRecord, TrialCompleted, TrialRule
from ...rules.scoring import cloud_speed_score, local_speed_score
from ...rules.stats import median, summarize
from ..adaptive import Decision, decide, describe, figure_kind, fixed_rule
from ..errors import EngineError
from ..metrics import request_metrics
from ..power import trial_energy
from ..providers.base import ChatRequest, ChatResponse
from .base import OUTPUT_LIMIT, RunContext, Suite, task_record
from .prompts import new_nonce, speed_messages

CALIBRATION_WORDS = 300
# Used only when the server reports no prompt token counts (then prompts are not calibrated).
FALLBACK_TOKENS_PER_WORD = 1.35
FALLBACK_BASE_TOKENS = 40
PROGRESS_INTERVAL_S = 0.25


def calibrate(base: int | None, full: int | None) -> tuple[bool, float, float]:
    """The server's prompt-token counts with no filler and with CALIBRATION_WORDS words give the
    fixed overhead and the tokens per filler word; (calibrated, overhead, per word), with the
    fallback estimates where the server counted nothing usable."""
    if base is not None and full is not None and 0 < base < full:
        return True, base, round((full - base) / CALIBRATION_WORDS, 4)
    return False, FALLBACK_BASE_TOKENS, FALLBACK_TOKENS_PER_WORD


def cell_samples(measures: list[str], trials: list[dict]) -> dict[str, list]:
    """Each figure a cell measures → its good trials' values (decode_tps or prefill_tps; a
    trial on a cached prompt has none for prefill)."""
    good = [t for t in trials if t["ok"]]
    return {f: [t[f"{figure_kind(f)}_tps"] for t in good] for f in measures}


def decode_only_next(decision: Decision, floor: int, local: bool) -> bool:
    """Whether the next trial may send the last prompt again, for the server to take from its
    prompt cache: only decode still misses its target, so the trial's work is the output. A
    long-prompt cell's extra trial then costs its output tokens, not 2,048 prompt tokens more.
    Remote (cloud) trials score TTFT, which a cached prompt would flatter: never there."""
    figures = decision["figures"]
    if not local or decision["stop"] or decision["trials_run"] < floor:
        return False
    kinds = {name: figure_kind(name) for name in figures}
    return all(f["met"] for name, f in figures.items() if kinds[name] != "decode") and any(
        not f["met"] for name, f in figures.items() if kinds[name] == "decode"
    )


# A trial on a cached prompt measures decode alone: its prefill-side figures are not kept.
_PREFILL_SIDE = ("prefill_tps", "ttft_ms", "server_prefill_tps", "prefill_ratio_vs_server")


class SpeedSuite(Suite):
    """Three cells, each figure measured once (speed.suite.json), each repeated by the run's
    trial rule (worker.engine.adaptive)."""

    # Its output lengths are what it measures: no thinking budget, --max-tokens only lowers.
    thinks = False

    def prepare(self, ctx: RunContext) -> None:
        """Two excluded warm-up requests that also measure prompt overhead and tokens per word.

        The server's own prompt-token count is the reference, so prompts hit their targets for
        whatever tokenizer the model uses.
        """
        instruction = self.tasks[0]["speed"]["instruction"]
        warmups = []
        counts: list[int | None] = []
        for words in (0, CALIBRATION_WORDS):
            nonce = new_nonce()
            request = ChatRequest(
                messages=speed_messages(nonce, instruction, words),
                max_tokens=1,
                temperature=0.0,
            )
            try:
                response = ctx.provider.chat_stream(request)
            except EngineError as exc:
                warmups.append({"warmup": True, "ok": False, "nonce": nonce, "error": exc.message})
                counts.append(None)
                continue
            counts.append(response.prompt_tokens)
            warmups.append(
                {
                    "warmup": True,
                    "ok": True,
                    "nonce": nonce,
                    "filler_words": words,
                    "prompt_tokens": response.prompt_tokens,
                    "ttft_ms": response.timing.first_token_ms if response.timing else None,
                }
            )
        calibrated, base_tokens, per_word = calibrate(*counts)
        ctx.suite_metadata["calibration"] = {
            "calibrated": calibrated,
            "base_tokens": base_tokens,
            "tokens_per_word": per_word,
            "reference_instruction_words": len(instruction.split()),
        }
        ctx.suite_metadata["warmup"] = warmups

    def _filler_words(self, task: dict, ctx: RunContext) -> int:
        calib = ctx.suite_metadata.get("calibration") or {
            "base_tokens": FALLBACK_BASE_TOKENS,
            "tokens_per_word": FALLBACK_TOKENS_PER_WORD,
            "reference_instruction_words": 0,
        }
        per_word = calib["tokens_per_word"]
        extra_words = (
            len(task["speed"]["instruction"].split()) - calib["reference_instruction_words"]
        )
        base = calib["base_tokens"] + extra_words * per_word
        return max(0, round((task["speed"]["prompt_tokens"] - base) / per_word))

    def run_task(self, task: dict, ctx: RunContext) -> TaskRecord:
        speed, config = task["speed"], task.get("config", {})
        target = speed["prompt_tokens"]
        n_words = self._filler_words(task, ctx)
        max_tokens = config.get("max_tokens", 128)
        ignore_eos = bool(getattr(ctx.provider, "supports_ignore_eos", False))
        rule = ctx.trial_rule or fixed_rule(ctx.trials)
        # A cell of the first method names nothing: it measures both kinds of figure.
        measures = speed.get("measures") or ["decode", "prefill"]
        trials: list[dict] = []
        last_output = ""
        decision: Decision | None = None
        nonce = ""
        for index in range(1, rule["ceiling"] + 1):
            ctx.check_stop()
            # Past the floor, with prefill within target, the same prompt again (see
            # decode_only_next); else a fresh nonce, so the server evaluates the whole prompt.
            reuse = bool(
                decision and nonce and decode_only_next(decision, rule["floor"], ctx.scoring_local)
            )
            nonce = nonce if reuse else new_nonce()
            request = ChatRequest(
                messages=speed_messages(
                    nonce, speed["instruction"], n_words, speed.get("passage_offset", 0)
                ),
                max_tokens=max_tokens,
                temperature=config.get("temperature", 0.0),
                ignore_eos=True,
            )
            on_chunk = progress_callback(ctx, self.name, task["id"], index, rule)
            # The power monitor's clock when the request leaves: the energy windows start here.
            sent = ctx.power.clock() if ctx.power is not None else 0.0
            try:
                response = ctx.provider.chat_stream(request, on_chunk=on_chunk)
            except EngineError as exc:
                trials.append(
                    {
                        "trial_index": index,
                        "warmup": False,
                        "ok": False,
                        "nonce": nonce,
                        "error": exc.message,
                        "error_kind": exc.kind,
                    }
                )
                ctx.emit(self._completed(task, index, None))
            else:
                trial = self._trial(
                    ctx, response, sent, index, nonce, target, (max_tokens, ignore_eos)
                )
                if reuse:
                    trial["prompt_reused"] = True
                    trial.update(dict.fromkeys(_PREFILL_SIDE))
                    trial["speed_metrics"] = {
                        **trial["speed_metrics"],
                        "ttft_ms": None,
                        "prompt_eval_tok_per_sec": None,
                        "total_latency_ms": None,
                    }
                trials.append(trial)
                last_output = response.content or response.reasoning or last_output
                ctx.emit(self._completed(task, index, trial))
            decision = decide(rule, index, cell_samples(measures, trials))
            if decision["stop"]:
                break
        return self._record(
            task, ctx, trials, last_output, n_words, max_tokens, ignore_eos, decision
        )

    def _trial(
        self,
        ctx: RunContext,
        response: ChatResponse,
        sent: float,
        index: int,
        nonce: str,
        target: int,
        limits: tuple[int, bool],
    ) -> dict:
        """One answered trial's record: the request's figures, its score and energy."""
        metrics = request_metrics(response)
        max_tokens, ignore_eos = limits
        actual = metrics["prompt_tokens"]
        trial = {
            "trial_index": index,
            "warmup": False,
            "ok": True,
            "nonce": nonce,
            "prompt_tokens_target": target,
            "prompt_tokens_deviation": round((actual - target) / target, 4) if actual else None,
            "max_tokens": max_tokens,
            "ignore_eos_sent": ignore_eos,
            "score": local_speed_score(metrics["decode_tps"])
            if ctx.scoring_local
            else cloud_speed_score(metrics["ttft_ms"], metrics["decode_tps"]),
            **metrics,
        }
        trial["energy"] = trial_energy(ctx.power, sent, metrics, ctx.power_note)
        return trial

    def _completed(self, task: dict, index: int, trial: dict | None) -> TrialCompleted:
        """The trial_completed event: a failed trial (None) carries no figures."""
        event = TrialCompleted(
            type="trial_completed", suite=self.name, task_id=task["id"], trial=index, ok=bool(trial)
        )
        if trial:
            event["decode_tps"] = trial["decode_tps"]
            event["ttft_ms"] = trial["ttft_ms"]
            event["prefill_tps"] = trial["prefill_tps"]
        return event

    def _record(
        self,
        task: dict,
        ctx: RunContext,
        trials: list[dict],
        output: str,
        n_words: int,
        max_tokens: int,
        ignore_eos: bool,
        decision: Decision | None,
    ) -> TaskRecord:
        good = [t for t in trials if t["ok"]]
        # The whole request's figures come from the trials that evaluated their prompt.
        fresh = [t for t in good if not t.get("prompt_reused")]
        failed = [t for t in trials if not t["ok"]]
        decode = median([t["decode_tps"] for t in good], digits=4)
        ttft = median([t["ttft_ms"] for t in fresh], digits=4)
        prefill = median([t["prefill_tps"] for t in fresh], digits=4)
        e2e = median([t["e2e_ms"] for t in fresh], digits=4)
        if decode:
            score = (
                local_speed_score(decode) if ctx.scoring_local else cloud_speed_score(ttft, decode)
            )
        else:
            score = 0.0
        error = ""
        if failed:
            error = f"{len(failed)}/{len(trials)} trials failed: {failed[0]['error']}"
        return task_record(
            task,
            self.name,
            passed=bool(decode),
            score=score,
            latency_ms=e2e or 0.0,
            tokens_generated=int(median([t["completion_tokens"] for t in good], digits=4) or 0),
            tokens_prompt=int(median([t["prompt_tokens"] for t in fresh], digits=4) or 0),
            error=error,
            output=output[:OUTPUT_LIMIT],
            execution_ok=bool(trials) and not failed,
            finish_reason=good[-1]["finish_reason"] if good else None,
            metadata={
                "speed_mode": "local" if ctx.scoring_local else "remote",
                "is_cloud_speed": not ctx.scoring_local,
                "selection_method": "median_of_trials",
                "prompt_tokens_target": task["speed"]["prompt_tokens"],
                "filler_words": n_words,
                "max_tokens": max_tokens,
                "ignore_eos": ignore_eos,
                "measures": task["speed"].get("measures") or ["decode", "prefill"],
                "trial_rule": ctx.trial_rule or fixed_rule(ctx.trials),
                # How the trials stopped: each measured figure's half-width reached and its
                # target, and a line that says a missed target plainly.
                "stopping": None if decision is None else {**decision, "note": describe(decision)},
                "speed_metrics": {
                    "ttft_ms": ttft or 0.0,
                    "prompt_eval_tok_per_sec": prefill or 0.0,
                    "generation_tok_per_sec": decode or 0.0,
                    "total_latency_ms": e2e or 0.0,
                },
                "summary": {
                    "decode_tps": summarize(t["decode_tps"] for t in good),
                    "prefill_tps": summarize(t["prefill_tps"] for t in good),
                    "ttft_ms": summarize((t["ttft_ms"] for t in good), higher_is_better=False),
                    "server_decode_tps": summarize(t["server_decode_tps"] for t in good),
                },
                "trials": trials,
            },
        )


def progress_callback(
    ctx: RunContext, suite: str, task_id: str, trial: int, rule: TrialRule | None = None
) -> Callable[[int, float], None]:
    """Chunk callback that emits throttled ``task_progress`` events with a live decode rate."""
    first: float | None = None
    last_emit = 0.0

    def on_chunk(chunks: int, elapsed: float) -> None:
        nonlocal first, last_emit
        if first is None:
            first = elapsed
        now = time.monotonic()
        if now - last_emit < PROGRESS_INTERVAL_S:
            return
        last_emit = now
        span = elapsed - first
        event = TaskProgress(
            type="task_progress",
            suite=suite,
            task_id=task_id,
            trial=trial,
            trials=rule["ceiling"] if rule else ctx.trials,
            chunks=chunks,
            live_tps=round((chunks - 1) / span, 2) if span > 0 and chunks > 1 else None,
        )
        if rule is not None:
            event["trials_floor"] = rule["floor"]
        ctx.emit(event)

    return on_chunk
