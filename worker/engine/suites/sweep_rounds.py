"""The concurrency sweep's rounds: c streams sent at one moment, and the level's figures from
its measured rounds (worker.engine.suites.sweep runs them; docs/metrics.md defines them)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...rules.stats import percentile, summarize
from ..errors import EngineError
from ..metrics import request_metrics
from ..providers.base import ChatRequest, Provider
from .prompts import new_nonce, speed_messages

# A response whose server load time is at least this was a (re)load of the model, not Ollama's
# bookkeeping for a loaded one (milliseconds or tens of them): its round becomes a warm-up.
RELOAD_MS = 200.0
# Below this many samples the TTFT tail is the maximum, not a 99th percentile.
P99_MIN_SAMPLES = 20
BARRIER_TIMEOUT_S = 60.0


def run_round(
    pool: ThreadPoolExecutor,
    providers: list[Provider],
    task: dict,
    round_index: int,
    words: int,
    n: int,
    warmup: str | None,
) -> list[dict]:
    """One round: every stream sends at the same moment (a barrier), each on its connection.
    A warm-up round (``warmup`` says why) is numbered as the measured round it precedes."""
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
            "warmup": warmup is not None,
            **({"warmup_reason": warmup} if warmup else {}),
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
            # The server's own load time for this request (Ollama's load_duration): a reload.
            "server_load_ms": response.server.load_ms if response.server else None,
            **metrics,
        }

    futures = [pool.submit(one, stream) for stream in range(len(providers))]
    return [future.result() for future in futures]


def reload_reason(batch: list[dict]) -> str | None:
    """Why this round was a reload (the server's own load time), or None."""
    loads = [r.get("server_load_ms") or 0.0 for r in batch if r.get("ok")]
    longest = max(loads, default=0.0)
    if longest < RELOAD_MS:
        return None
    return f"the server loaded the model during this round ({longest:.0f} ms)"


def round_rates(good: list[dict]) -> dict[str, float | None]:
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


def concurrency_cell(streams: int, results: list[dict]) -> dict[str, Any]:
    good = [r for r in results if r["ok"]]
    if not good:
        reason = next((r["error"] for r in results if r.get("error")), "every request failed")
        return {"streams": streams, "status": "failed", "reason": str(reason)[:300]}
    indexes = sorted({r["round"] for r in good})
    rounds = [round_rates([r for r in good if r["round"] == i]) for i in indexes]
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
