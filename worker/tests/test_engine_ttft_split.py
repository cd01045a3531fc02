"""Prefill's token count and window, and the TTFT split, on every kind of server answer."""

from __future__ import annotations

import pytest

from worker.engine.metrics import evaluated_prompt_tokens
from worker.engine.providers.base import ChatResponse
from worker.rules.timings import ServerTimings, StreamTiming, prefill_window, ttft_split


def _timing(first: float, headers: float | None, written: float | None = 0.2) -> StreamTiming:
    return StreamTiming(first_token_ms=first, headers_ms=headers, written_ms=written)


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        # llama.cpp: timings.prompt_n already leaves the cached prefix out.
        (
            ChatResponse(
                prompt_tokens=150, cached_tokens=25, server=ServerTimings("llama.cpp", prompt_n=125)
            ),
            (125, "server"),
        ),
        # An OpenAI-style server with usage.prompt_tokens_details only.
        (ChatResponse(prompt_tokens=150, cached_tokens=25), (125, "usage")),
        (ChatResponse(prompt_tokens=150, cached_tokens=0), (150, "usage")),
        # No cache count anywhere: every prompt token is assumed evaluated, and said so.
        (ChatResponse(prompt_tokens=150), (150, "estimated")),
        (ChatResponse(), (None, None)),
        # A server reporting more cached tokens than prompt tokens never gives a negative count.
        (ChatResponse(prompt_tokens=10, cached_tokens=12), (0, "usage")),
    ],
)
def test_evaluated_prompt_tokens_and_their_source(response, expected):
    assert evaluated_prompt_tokens(response) == expected


def test_the_prefill_window_starts_at_the_headers_when_they_came_before_the_prompt_ran():
    assert prefill_window(_timing(first=600.0, headers=12.0)) == (588.0, "headers")


def test_headers_sent_with_the_first_chunk_leave_ttft_as_the_window():
    # A server that holds its headers until the first token: headers-to-token would be ~0.
    assert prefill_window(_timing(first=600.0, headers=599.5)) == (600.0, "sent")
    assert prefill_window(_timing(first=600.0, headers=None)) == (600.0, "sent")
    assert prefill_window(_timing(first=None, headers=3.0)) == (None, None)  # type: ignore[arg-type]


def test_late_headers_mark_a_queued_slot_start_when_the_server_s_prompt_time_fits_after_them():
    # One slot, busy for 9 s with another request: this one's headers came when its slot started,
    # 9,010 ms after sending, and the prompt took the server 580 ms of the 600 left to the first
    # token. The window is the 590 ms from the headers, not all 9,600 ms of TTFT.
    queued = _timing(first=9600.0, headers=9010.0)
    server = ServerTimings("llama.cpp", prompt_n=100, prompt_ms=580.0)
    assert prefill_window(queued, server) == (590.0, "headers")
    # 0.9 of the prompt time is the least that counts (the headers leave a moment late) ...
    assert prefill_window(_timing(first=9600.0, headers=9078.0), server) == (522.0, "headers")
    # ... and less than that is a server that held its headers: TTFT stays the window.
    assert prefill_window(_timing(first=9600.0, headers=9079.0), server) == (9600.0, "sent")
    # Without the server's prompt time, late headers prove nothing.
    assert prefill_window(queued, None) == (9600.0, "sent")
    assert prefill_window(queued, ServerTimings("llama.cpp", prompt_ms=0.0)) == (9600.0, "sent")


def test_a_queued_request_s_ttft_is_its_wait_then_the_prompt_then_the_client():
    server = ServerTimings("llama.cpp", prompt_n=100, prompt_ms=580.0)
    split = ttft_split(_timing(first=9600.0, headers=9010.2, written=0.2), server)
    assert split == {
        # Written → slot start: the wait, with the setup inside it (no clock separates them).
        "ttft_queue_ms": 9010.0,
        "ttft_server_setup_ms": None,
        "ttft_server_prompt_ms": 580.0,
        "ttft_server_ms": 580.0,
        "ttft_client_ms": 10.0,
        "ttft_split_source": "llama.cpp timings + response headers (queued for a slot)",
    }
    parts = split["ttft_queue_ms"] + split["ttft_server_ms"] + split["ttft_client_ms"]
    assert parts == pytest.approx(9600.0)


def test_late_headers_on_a_long_cached_context_are_setup_not_a_wait():
    # 64 new tokens on 32,000 cached ones: the server tokenised the whole context again (120 ms)
    # before the slot started, then evaluated 64 tokens in 40 ms. The window still starts at the
    # headers; the span before them is shorter than evaluating the whole prompt, so it is setup.
    server = ServerTimings("llama.cpp", prompt_n=64, cache_n=32000, prompt_ms=40.0)
    timing = _timing(first=165.0, headers=120.2, written=0.2)
    assert prefill_window(timing, server) == (pytest.approx(44.8), "headers")
    split = ttft_split(timing, server)
    assert (split["ttft_queue_ms"], split["ttft_server_setup_ms"]) == (0.0, 120.0)
    assert split["ttft_split_source"] == "llama.cpp timings + response headers"
    # The same span without the cached context outlasts the prompt's evaluation: a wait.
    uncached = ServerTimings("llama.cpp", prompt_n=64, cache_n=0, prompt_ms=40.0)
    assert ttft_split(timing, uncached)["ttft_queue_ms"] == 120.0


def test_a_queued_request_whose_headers_were_read_late_keeps_a_non_negative_client_share():
    # 560 ms from headers to first token against 580 ms of prompt: the headers were read 20 ms
    # after the slot started. The wait is capped where the prompt must have begun.
    server = ServerTimings("llama.cpp", prompt_n=100, prompt_ms=580.0)
    split = ttft_split(_timing(first=9600.0, headers=9040.0, written=0.2), server)
    assert split["ttft_queue_ms"] == 9019.8
    assert split["ttft_client_ms"] == 0.2
    assert split["ttft_split_source"] == (
        "llama.cpp timings + response headers (headers after the prompt began) (queued for a slot)"
    )


def test_ttft_split_adds_up_and_names_its_source():
    server = ServerTimings("llama.cpp", prompt_n=100, prompt_ms=580.0)
    split = ttft_split(_timing(first=600.0, headers=12.2, written=0.2), server)
    assert split == {
        "ttft_queue_ms": 0.0,
        "ttft_server_setup_ms": 12.0,
        "ttft_server_prompt_ms": 580.0,
        "ttft_server_ms": 592.0,
        "ttft_client_ms": 8.0,
        "ttft_split_source": "llama.cpp timings + response headers",
    }


def test_headers_read_after_the_prompt_began_never_make_the_client_s_share_negative():
    # 600 ms TTFT, 580 ms of prompt: headers at 45 ms would mean 44.8 ms of setup before a prompt
    # that then ran past the first token. The setup is what the clocks leave room for.
    server = ServerTimings("llama.cpp", prompt_n=100, prompt_ms=580.0)
    split = ttft_split(_timing(first=600.0, headers=45.0, written=0.2), server)
    assert split == {
        "ttft_queue_ms": 0.0,
        "ttft_server_setup_ms": 19.8,
        "ttft_server_prompt_ms": 580.0,
        "ttft_server_ms": 599.8,
        "ttft_client_ms": 0.2,
        "ttft_split_source": "llama.cpp timings + response headers"
        " (headers after the prompt began)",
    }
    # A prompt the server says took longer than TTFT leaves no room at all: no setup.
    longer = ServerTimings("llama.cpp", prompt_ms=610.0)
    late = ttft_split(_timing(first=600.0, headers=10.0), longer)
    assert late["ttft_server_setup_ms"] == 0.0 and late["ttft_client_ms"] == -10.0


def test_ollama_split_counts_its_load_time_as_the_servers():
    # Ollama answers headers with the first chunk, so setup is not separable: it stays in the
    # client's share and the source says only the durations were used.
    server = ServerTimings("ollama", prompt_n=40, prompt_ms=300.0, load_ms=1500.0)
    split = ttft_split(_timing(first=1850.0, headers=1849.0), server)
    assert split["ttft_queue_ms"] is None and split["ttft_server_setup_ms"] is None
    assert split["ttft_server_ms"] == 1800.0
    assert split["ttft_client_ms"] == 50.0
    assert split["ttft_split_source"] == "ollama timings"


def test_no_server_timing_means_no_split():
    split = ttft_split(_timing(first=600.0, headers=10.0), None)
    assert set(split.values()) == {None}
    no_prompt_ms = ttft_split(_timing(first=600.0, headers=10.0), ServerTimings("llama.cpp"))
    assert set(no_prompt_ms.values()) == {None}
