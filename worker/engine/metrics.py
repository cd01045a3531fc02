"""Speed metrics of one streamed request, and run-level summaries (see docs/metrics.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..contract import SpeedMetrics, SpeedSummary
from .providers.base import ChatResponse, ServerTimings, StreamTiming
from .reasoning import reasoning_metrics
from .stats import median_interval, percentile, summarize


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


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
            "median": _r(percentile(gaps, 0.5)) if gaps else None,
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


# The headers mark the start of prompt evaluation if they came well before the first output
# (llama.cpp sends them when the slot starts on the prompt); a server that sends them together with
# the first chunk leaves TTFT as the window.
_HEADERS_SHARE_MAX = 0.5
# Headers later than that still mark the slot's start when the rest of TTFT holds the server's own
# prompt time: llama.cpp starts a queued request's slot only when one frees, so its headers come
# after the wait. 0.9, not 1: the HTTP thread passes the headers on a moment after the slot began.
# A server that sends headers with the first chunk leaves ~0 ms there, far below either.
_SLOT_START_PROMPT_SHARE = 0.9


def prefill_window(
    timing: StreamTiming, server: ServerTimings | None = None
) -> tuple[float | None, str | None]:
    """The time the prompt took, from the client's clock: response headers → first output.

    llama.cpp answers a streamed request's headers once a slot starts on its prompt, after the
    HTTP parsing, templating and tokenising that scale with the prompt, and after any wait for a
    free slot; from then until the first output chunk it evaluates the prompt. Headers in the
    second half of TTFT count only when the server's prompt_ms fits after them (a queued
    request). Without such headers the window is all of TTFT.
    """
    ttft, headers = timing.first_token_ms, timing.headers_ms
    if ttft is None or ttft <= 0:
        return None, None
    if headers is None or not 0 <= headers <= ttft:
        return ttft, "sent"
    if headers <= ttft * _HEADERS_SHARE_MAX or _slot_started_at_headers(ttft - headers, server):
        return ttft - headers, "headers"
    return ttft, "sent"


def _slot_started_at_headers(after_headers: float, server: ServerTimings | None) -> bool:
    """The server's own prompt time fits between the headers and the first output."""
    if server is None or not server.prompt_ms:
        return False
    return after_headers >= _SLOT_START_PROMPT_SHARE * server.prompt_ms


def _whole_prompt_ms(server: ServerTimings) -> float:
    """The server's time for the whole prompt, its cached tokens too, at its measured rate.

    Setup (parsing, template, tokenising) takes far less than evaluating the same prompt, so a
    span before the slot's start longer than this was a wait for the slot. The cached tokens
    count: a long cached context is tokenised again on every request but not evaluated.
    """
    prompt = server.prompt_ms or 0.0
    if not server.prompt_n:
        return prompt
    return prompt * (server.prompt_n + (server.cache_n or 0)) / server.prompt_n


def ttft_split(timing: StreamTiming, server: ServerTimings | None) -> dict[str, Any]:
    """TTFT as the wait for a slot, the server's share and the client's; they add up to TTFT.

    Queue = request written → response headers when the headers came in the second half of TTFT,
    a slot start there is what the server's prompt time says (`prefill_window`) and the span
    outlasts the whole prompt's evaluation (`_whole_prompt_ms`): the request waited for a slot.
    That span also holds the setup, which neither clock separates from the wait, so setup is
    null then. Otherwise queue is 0 and setup = written → headers (parsing, template,
    tokenising, slot launch). Server = setup + prompt evaluation (the server's own prompt_ms,
    plus Ollama's load time when it loaded the model for this request). Client = TTFT − queue −
    server: connecting and writing the request, the first chunk's trip and our SSE parsing. All
    null without the server's prompt time; queue and setup null when no headers mark the slot's
    start.
    """
    out: dict[str, Any] = {
        "ttft_queue_ms": None,
        "ttft_server_setup_ms": None,
        "ttft_server_prompt_ms": None,
        "ttft_server_ms": None,
        "ttft_client_ms": None,
        "ttft_split_source": None,
    }
    ttft = timing.first_token_ms
    if ttft is None or server is None or server.prompt_ms is None:
        return out
    prompt = server.prompt_ms + (server.load_ms or 0.0)
    setup = queue = None
    label = f"{server.source} timings"
    _, source = prefill_window(timing, server)
    if source == "headers" and timing.headers_ms is not None:
        written = timing.written_ms or 0.0
        before = max(timing.headers_ms - written, 0.0)
        label += " + response headers"
        # Headers read after the prompt began (this thread waited for a CPU, or the server's
        # HTTP thread did) would count that overlap twice; the server's share then ends at
        # the write, and the client's is the write alone (a lower bound).
        room = max(ttft - written - prompt, 0.0)
        if before > room:
            before = room
            label += " (headers after the prompt began)"
        if timing.headers_ms > ttft * _HEADERS_SHARE_MAX and before > _whole_prompt_ms(server):
            queue = before
            label += " (queued for a slot)"
        else:
            setup, queue = before, 0.0
    server_ms = prompt + (setup or 0.0)
    out.update(
        ttft_queue_ms=_r(queue),
        ttft_server_setup_ms=_r(setup),
        ttft_server_prompt_ms=_r(prompt),
        ttft_server_ms=_r(server_ms),
        ttft_client_ms=_r(ttft - (queue or 0.0) - server_ms),
        ttft_split_source=label,
    )
    return out


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


def _median_of(values: list[float | None]) -> float | None:
    """The median of three or more values, else None (two values have no median to report)."""
    return _r(median_interval(values)["median"], 4)


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
        decode_ratio_vs_server=_median_of([t.get("decode_ratio_vs_server") for t in dec]),
        prefill_ratio_vs_server=_median_of([t.get("prefill_ratio_vs_server") for t in pre]),
        ttft_minus_server_prompt_ms=_median_of([t.get("ttft_minus_server_prompt_ms") for t in pre]),
        ttft_client_ms=_median_of([t.get("ttft_client_ms") for t in pre]),
        ttft_server_setup_ms=_median_of([t.get("ttft_server_setup_ms") for t in pre]),
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
