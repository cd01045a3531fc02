"""One streamed request's clock readings, the server's own timings, and how TTFT splits
between them (docs/metrics.md): the engine measures with these, the site re-derives old runs'
splits with the same rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


def rounded(value: float | None, digits: int = 3) -> float | None:
    """``value`` rounded to ``digits`` (None stays None)."""
    return None if value is None else round(value, digits)


class SentLike(Protocol):
    """The clock readings of a sent request (worker.engine.transport.Sent)."""

    t_sent: float
    t_written: float | None
    t_headers: float | None
    retried: bool
    new_connection: bool


@dataclass
class ServerTimings:
    """What the server itself reports about a request (llama.cpp ``timings``, Ollama counters)."""

    source: str
    prompt_n: int | None = None
    prompt_ms: float | None = None
    predicted_n: int | None = None
    predicted_ms: float | None = None
    cache_n: int | None = None
    prompt_per_second: float | None = None
    predicted_per_second: float | None = None
    # Time the server spent loading the model for this request (Ollama's load_duration).
    load_ms: float | None = None
    # Speculative decoding, where llama.cpp ran it: tokens drafted and how many the model
    # accepted (its timings' draft_n and draft_n_accepted; absent without speculation).
    draft_n: int | None = None
    draft_n_accepted: int | None = None


@dataclass
class StreamTiming:
    """Client-side clock readings for one streamed request, in ms relative to ``t_sent``.

    ``first_content_ms`` is the first answer token: the first event with answer text that is not
    only whitespace, or a tool call (reasoning, inline ``<think>`` text included, is not answer).
    """

    first_token_ms: float | None = None
    first_content_ms: float | None = None
    last_token_ms: float | None = None
    done_ms: float | None = None
    token_chunk_ms: list[float] = field(default_factory=list)
    event_count: int = 0
    retried: bool = False
    # When the request body was fully written and when the response headers arrived (ms after
    # t_sent), and whether the request had to open a TCP connection: the parts of TTFT that
    # are the client's and the server's before prompt evaluation (docs/metrics.md).
    written_ms: float | None = None
    headers_ms: float | None = None
    new_connection: bool = False
    # Output events that carried reasoning and answer (OutputSplit): about one token each on
    # llama.cpp and Ollama, so the stream's own count of each where the server gives none.
    reasoning_events: int = 0
    answer_events: int = 0

    def start(self, sent: SentLike) -> float:
        """Take the transport's clock readings of the sent request; returns its t_sent."""
        self.retried = sent.retried
        self.new_connection = sent.new_connection
        if sent.t_written is not None:
            self.written_ms = round((sent.t_written - sent.t_sent) * 1000, 3)
        if sent.t_headers is not None:
            self.headers_ms = round((sent.t_headers - sent.t_sent) * 1000, 3)
        return sent.t_sent

    def mark_output(self, now: float, t_sent: float, *, content: bool) -> int:
        """An output chunk arrived at `now` (perf_counter seconds): keep its offset and the
        first-token and first-content marks; returns the number of output chunks so far."""
        offset = round((now - t_sent) * 1000, 3)
        self.token_chunk_ms.append(offset)
        if self.first_token_ms is None:
            self.first_token_ms = offset
        if content and self.first_content_ms is None:
            self.first_content_ms = offset
        self.last_token_ms = offset
        return len(self.token_chunk_ms)


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
        ttft_queue_ms=rounded(queue),
        ttft_server_setup_ms=rounded(setup),
        ttft_server_prompt_ms=rounded(prompt),
        ttft_server_ms=rounded(server_ms),
        ttft_client_ms=rounded(ttft - (queue or 0.0) - server_ms),
        ttft_split_source=label,
    )
    return out
