"""Prefill's token count and window, and the TTFT split, on every kind of server answer."""

from __future__ import annotations

import pytest

from worker.engine.metrics import evaluated_prompt_tokens, prefill_window, ttft_split
from worker.engine.providers.base import ChatResponse, ServerTimings, StreamTiming


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


def test_ttft_split_adds_up_and_names_its_source():
    server = ServerTimings("llama.cpp", prompt_n=100, prompt_ms=580.0)
    split = ttft_split(_timing(first=600.0, headers=12.2, written=0.2), server)
    assert split == {
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
    assert split["ttft_server_setup_ms"] is None
    assert split["ttft_server_ms"] == 1800.0
    assert split["ttft_client_ms"] == 50.0
    assert split["ttft_split_source"] == "ollama timings"


def test_no_server_timing_means_no_split():
    split = ttft_split(_timing(first=600.0, headers=10.0), None)
    assert set(split.values()) == {None}
    no_prompt_ms = ttft_split(_timing(first=600.0, headers=10.0), ServerTimings("llama.cpp"))
    assert set(no_prompt_ms.values()) == {None}
