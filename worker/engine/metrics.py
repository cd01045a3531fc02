"""Speed metrics of one streamed request, and run-level summaries (see docs/metrics.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..rules.contract import SpeedMetrics, SpeedSummary
from ..rules.stats import MIN_MEDIAN_N, median, percentile, summarize
from ..rules.timings import prefill_window, ttft_split
from ..rules.timings import rounded as _r
from .providers.base import ChatResponse
from .reasoning import reasoning_metrics


def request_metrics(response: ChatResponse) -> dict[str, Any]:
    """Client-measured speed of one streamed request plus the server's own numbers.

    TTFT = first output chunk − sent. E2E = last output chunk − sent. N = the server's completion
    token count (the count of output chunks only if the server reports none).
    TPOT = (E2E − TTFT)/(N − 1); decode tok/s = 1000/TPOT.
    Prefill tok/s = prompt tokens the server evaluated (cached ones excluded) / prefill window,
    and TTFT is split into the server's share and the client's (see `prefill` and `ttft_split`).
    """
    timing = response.timing
    if timing is None:
        raise ValueError("speed metrics need a streamed response")
    chunks = timing.token_chunk_ms
    n_server = response.completion_tokens
    n = n_server if n_server else len(chunks)
    ttft, e2e = timing.first_token_ms, timing.last_token_ms
    tpot = decode = prefill = None
    if ttft is not None and e2e is not None and n >= 2 and e2e > ttft:
        tpot = (e2e - ttft) / (n - 1)
        decode = 1000.0 / tpot
    prefill_tokens, prefill_tokens_source = evaluated_prompt_tokens(response)
    window, window_source = prefill_window(timing, response.server)
    if window and prefill_tokens:
        prefill = prefill_tokens / (window / 1000.0)
    gaps = sorted(b - a for a, b in zip(chunks, chunks[1:], strict=False))
    server = response.server
    server_decode = server.predicted_per_second if server else None
    server_prefill = server.prompt_per_second if server else None
    metrics = {
        "completion_tokens": n,
        "token_count_source": "server" if n_server else "chunks",
        "prompt_tokens": response.prompt_tokens,
        "cached_tokens": response.cached_tokens,
        "prefill_tokens": prefill_tokens,
        "prefill_tokens_source": prefill_tokens_source,
        "prefill_window_ms": _r(window),
        "prefill_window_source": window_source,
        "finish_reason": response.finish_reason,
        "ttft_ms": _r(ttft),
        "ttft_content_ms": _r(timing.first_content_ms),
        "e2e_ms": _r(e2e),
        "done_ms": _r(timing.done_ms),
        "tpot_ms": _r(tpot, 4),
        "decode_tps": _r(decode),
        "prefill_tps": _r(prefill),
        "itl_ms": {
            "n": len(gaps),
            "median": median(gaps, digits=3),
            "p95": _r(percentile(gaps, 0.95)) if gaps else None,
            "p99": _r(percentile(gaps, 0.99)) if gaps else None,
            "max": _r(gaps[-1]) if gaps else None,
        },
        "server": _server_dict(response),
        "server_decode_tps": _r(server_decode),
        "server_prefill_tps": _r(server_prefill),
        "decode_ratio_vs_server": _r(decode / server_decode, 4)
        if decode and server_decode
        else None,
        "prefill_ratio_vs_server": _r(prefill / server_prefill, 4)
        if prefill and server_prefill
        else None,
        "ttft_minus_server_prompt_ms": _r(ttft - server.prompt_ms)
        if ttft is not None and server and server.prompt_ms is not None
        else None,
        **ttft_split(timing, server),
        "retried_connection": timing.retried,
        "timings": {
            "t_sent_ms": 0.0,
            "written_ms": timing.written_ms,
            "headers_ms": timing.headers_ms,
            "new_connection": timing.new_connection,
            "first_token_ms": _r(ttft),
            "first_content_ms": _r(timing.first_content_ms),
            "last_token_ms": _r(e2e),
            "done_ms": _r(timing.done_ms),
            "event_count": timing.event_count,
            "chunk_ms": chunks,
        },
    }
    # Reasoning models (a block of its own, apart from the TTFT and prefill figures above): the
    # reasoning/answer token split, time to the first answer token, truncation in the thinking.
    metrics.update(reasoning_metrics(response))
    # The v3 per-trial block, so older readers find the numbers where they expect them.
    metrics["speed_metrics"] = {
        "ttft_ms": metrics["ttft_ms"] or 0.0,
        "prompt_eval_tok_per_sec": metrics["prefill_tps"] or 0.0,
        "generation_tok_per_sec": metrics["decode_tps"] or 0.0,
        "total_latency_ms": metrics["e2e_ms"] or 0.0,
    }
    return metrics


def evaluated_prompt_tokens(response: ChatResponse) -> tuple[int | None, str | None]:
    """The prompt tokens the server actually evaluated, and where the count came from.

    Servers reuse a prompt cache (the chat template's fixed prefix at least), so the prompt's
    full length overstates the work done. llama.cpp's ``timings.prompt_n`` and Ollama's count
    less its cached count (providers.ollama) leave the cached tokens out ("server"); else the usage
    block's prompt tokens minus its cached tokens ("usage"); with no cache count at all, every
    prompt token is assumed evaluated ("estimated").
    """
    server = response.server
    if server is not None and server.prompt_n:
        return server.prompt_n, "server"
    if response.prompt_tokens and response.cached_tokens is not None:
        return max(response.prompt_tokens - response.cached_tokens, 0), "usage"
    if response.prompt_tokens:
        return response.prompt_tokens, "estimated"
    return None, None


def _server_dict(response: ChatResponse) -> dict[str, Any] | None:
    server = response.server
    if server is None:
        return None
    return {
        "source": server.source,
        "prompt_n": server.prompt_n,
        "prompt_ms": _r(server.prompt_ms),
        "predicted_n": server.predicted_n,
        "predicted_ms": _r(server.predicted_ms),
        "cache_n": server.cache_n,
        "prompt_per_second": _r(server.prompt_per_second),
        "predicted_per_second": _r(server.predicted_per_second),
        # Speculative decoding as the server counted it (site: submissions.run_facts).
        **(
            {"draft_n": server.draft_n, "draft_n_accepted": server.draft_n_accepted}
            if server.draft_n is not None
            else {}
        ),
    }


# The run's headline figures and the trial values each pools (the rest come from all trials).
HEADLINE_DECODE = "decode"
HEADLINE_PREFILL = "prefill"


def _measures(task: Mapping[str, Any], figure: str | None) -> bool:
    """Whether a task's trials count towards ``figure`` (None: any). A task names what it
    measures since speed method 2; one that names nothing (method 1) measures every figure."""
    if figure is None:
        return True
    named = (task.get("metadata") or {}).get("measures")
    return not named or figure in named


def measured_trials(
    tasks: Sequence[Mapping[str, Any]], figure: str | None = None
) -> list[dict[str, Any]]:
    """Every successful, non-warm-up trial of the given speed task records; with ``figure``,
    only those of the tasks that measure it ("decode": the headline decode rate)."""
    out = []
    for task in tasks:
        if not _measures(task, figure):
            continue
        for trial in (task.get("metadata") or {}).get("trials") or []:
            if trial.get("ok", True) and not trial.get("warmup"):
                out.append(trial)
    return out


def speed_summary(tasks: Sequence[Mapping[str, Any]]) -> SpeedSummary:
    """Run-level distributions: the decode figures over the trials of the tasks that measure
    decode, the prefill and TTFT figures over those that measure prefill (every task of a
    method-1 run measures both: all its trials pooled)."""
    dec = measured_trials(tasks, HEADLINE_DECODE)
    pre = measured_trials(tasks, HEADLINE_PREFILL)
    itl = [t["itl_ms"]["median"] for t in dec if (t.get("itl_ms") or {}).get("median")]
    return SpeedSummary(
        decode_tps=summarize(t.get("decode_tps") for t in dec),
        prefill_tps=summarize(t.get("prefill_tps") for t in pre),
        ttft_ms=summarize((t.get("ttft_ms") for t in pre), higher_is_better=False),
        server_decode_tps=summarize(t.get("server_decode_tps") for t in dec),
        server_prefill_tps=summarize(t.get("server_prefill_tps") for t in pre),
        itl_median_ms=summarize(itl, higher_is_better=False),
        decode_ratio_vs_server=median(
            [t.get("decode_ratio_vs_server") for t in dec], min_n=MIN_MEDIAN_N, digits=4
        ),
        prefill_ratio_vs_server=median(
            [t.get("prefill_ratio_vs_server") for t in pre], min_n=MIN_MEDIAN_N, digits=4
        ),
        ttft_minus_server_prompt_ms=median(
            [t.get("ttft_minus_server_prompt_ms") for t in pre], min_n=MIN_MEDIAN_N, digits=4
        ),
        ttft_client_ms=median([t.get("ttft_client_ms") for t in pre], min_n=MIN_MEDIAN_N, digits=4),
        ttft_server_setup_ms=median(
            [t.get("ttft_server_setup_ms") for t in pre], min_n=MIN_MEDIAN_N, digits=4
        ),
    )


def speed_metrics_v3(tasks: Sequence[Mapping[str, Any]]) -> SpeedMetrics:
    """The v3 ``speed_metrics`` keys, from the same trials as ``speed_summary`` (end-to-end
    latency, which no cell measures, over every trial)."""
    dec, pre = measured_trials(tasks, HEADLINE_DECODE), measured_trials(tasks, HEADLINE_PREFILL)
    decode = sorted(t["decode_tps"] for t in dec if t.get("decode_tps"))
    ttft = sorted(t["ttft_ms"] for t in pre if t.get("ttft_ms"))
    prefill = sorted(t["prefill_tps"] for t in pre if t.get("prefill_tps"))
    e2e = sorted(t["e2e_ms"] for t in measured_trials(tasks) if t.get("e2e_ms"))

    def pct(values: list[float], q: float) -> float:
        return round(percentile(values, q), 4) if values else 0.0

    return SpeedMetrics(
        ttft_ms=pct(ttft, 0.5),
        prompt_eval_tok_per_sec=pct(prefill, 0.5),
        generation_tok_per_sec=pct(decode, 0.5),
        total_latency_ms=pct(e2e, 0.5),
        generation_tok_per_sec_p50=pct(decode, 0.5),
        generation_tok_per_sec_p95=pct(decode, 0.95),
        ttft_ms_p50=pct(ttft, 0.5),
        ttft_ms_p95=pct(ttft, 0.95),
        sample_count=len(decode),
    )


def _trial_value(trial: dict[str, Any], key: str, legacy_key: str) -> float | None:
    # Numbers or null in every format (the bundle schema says so for ours).
    value: float | None = trial.get(key)
    if value is None:
        value = (trial.get("speed_metrics") or {}).get(legacy_key) or None
    return value


def speed_samples(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Measured speed samples of any run document (ours or legacy): one dict per good trial."""
    out = []
    for task in (doc.get("suites", {}).get("speed") or {}).get("tasks") or []:
        for trial in (task.get("metadata") or {}).get("trials") or []:
            if trial.get("warmup") or trial.get("error") or trial.get("ok") is False:
                continue
            out.append(
                {
                    "task_id": task.get("task_id"),
                    "decode_tps": _trial_value(trial, "decode_tps", "generation_tok_per_sec"),
                    "prefill_tps": _trial_value(trial, "prefill_tps", "prompt_eval_tok_per_sec"),
                    "ttft_ms": _trial_value(trial, "ttft_ms", "ttft_ms"),
                }
            )
    return out
