"""Providers, detection and error paths against a real llama.cpp server."""

from __future__ import annotations

import json
import time

import pytest

from worker.engine.detect import LLAMA_CPP, describe_model, detect_endpoint, resolve_model
from worker.engine.errors import (
    AuthError,
    ContextOverflow,
    EndpointUnreachable,
    UnknownModel,
    UsageError,
)
from worker.engine.providers import ChatRequest, OpenAIProvider
from worker.engine.providers.base import split_think
from worker.engine.testing.xllama_launcher import free_port
from worker.engine.transport import Transport, normalize_base_url
from worker.tests.race_server import race_server

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _tool_messages() -> list[dict]:
    """A few-shot conversation that makes even a 135M model answer with a tool call."""
    messages = [{"role": "system", "content": "You answer every question by calling a tool."}]
    for i, city in enumerate(["Rome", "Oslo", "Lima"]):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city})},
        }
        messages += [
            {"role": "user", "content": f"Weather in {city}?"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": json.dumps({"temp_c": 20 + i})},
        ]
    messages.append({"role": "user", "content": "Weather in Paris?"})
    return messages


@pytest.fixture
def provider(llm_url, llm_model):
    transport = Transport(llm_url, timeout=60)
    prov = OpenAIProvider(transport, llm_model, supports_ignore_eos=True)
    yield prov
    prov.close()


@pytest.mark.llm
def test_it_streams_a_chat_with_usage_timings_and_a_clock_per_chunk(provider):
    request = ChatRequest(
        messages=[{"role": "user", "content": "Name three colours."}],
        max_tokens=24,
        ignore_eos=True,
    )
    response = provider.chat_stream(request)
    assert response.streamed
    assert response.content
    assert response.completion_tokens == 24  # ignore_eos + max_tokens fixes the length
    assert response.finish_reason == "length"
    assert response.prompt_tokens and response.prompt_tokens > 5
    timing = response.timing
    assert 0 < timing.first_token_ms <= timing.last_token_ms <= timing.done_ms
    assert timing.token_chunk_ms == sorted(timing.token_chunk_ms)
    # llama.cpp streams one token per event, so every token has its own arrival time.
    assert len(timing.token_chunk_ms) == response.completion_tokens
    assert response.server.source == "llama.cpp"
    assert response.server.predicted_n == 24
    assert response.server.predicted_per_second > 0


@pytest.mark.llm
def test_it_answers_without_streaming(provider):
    response = provider.chat(
        ChatRequest(messages=[{"role": "user", "content": "Say hello."}], max_tokens=8)
    )
    assert not response.streamed
    assert response.content
    assert response.completion_tokens <= 8
    assert response.wall_ms > 0
    assert response.server.prompt_n is not None


@pytest.mark.llm
@pytest.mark.parametrize("stream", [False, True])
def test_it_parses_tool_calls_from_the_server(provider, stream):
    request = ChatRequest(
        messages=_tool_messages(), tools=[WEATHER_TOOL], tool_choice="auto", max_tokens=40
    )
    response = provider.chat_stream(request) if stream else provider.chat(request)
    assert response.finish_reason == "tool_calls"
    assert len(response.tool_calls) == 1
    call = response.tool_calls[0]
    assert call.name == "get_weather"
    assert call.arguments == {"city": "Paris"}
    assert json.loads(call.raw_arguments) == {"city": "Paris"}
    assert call.id


@pytest.mark.llm
def test_it_lists_models_and_detects_llama_cpp(llm_url, llm_model):
    with Transport(llm_url + "/v1/", timeout=10) as transport:
        info = detect_endpoint(transport)
        assert info.kind == LLAMA_CPP
        assert info.api == "openai"
        assert info.supports_ignore_eos
        assert llm_model in info.models
        assert info.launch["context_length"] == 4096
        assert info.launch["model_file"].endswith(".gguf")
        assert "/" not in info.launch["model_file"]
        assert resolve_model(info, llm_model) == llm_model
        assert resolve_model(info, None) == llm_model  # the only model served
        model = describe_model(info, llm_model)
        assert model["quantization"] == "Q4_1"
        assert model["parameter_count"].endswith("M")
        provider = OpenAIProvider(transport, llm_model)
        assert provider.list_models() == info.models


@pytest.mark.llm
def test_an_unknown_model_is_refused_with_the_served_list(llm_url):
    with Transport(llm_url, timeout=10) as transport:
        info = detect_endpoint(transport)
    with pytest.raises(UnknownModel) as caught:
        resolve_model(info, "qwen3:8b")
    assert "smollm2-135m" in caught.value.hint
    assert caught.value.kind == "unknown_model"


def test_a_server_that_is_down_is_reported_as_unreachable():
    transport = Transport(f"http://127.0.0.1:{free_port()}", timeout=5)
    with transport, pytest.raises(EndpointUnreachable) as caught:
        detect_endpoint(transport)
    assert "running" in caught.value.hint


@pytest.mark.llm
def test_a_prompt_larger_than_the_context_is_a_context_overflow(provider):
    words = " ".join(["harbour"] * 5000)
    with pytest.raises(ContextOverflow) as caught:
        provider.chat_stream(ChatRequest(messages=[{"role": "user", "content": words}]))
    assert "context" in caught.value.hint


@pytest.mark.llm
def test_a_remote_style_key_is_sent_as_bearer_and_refusals_say_so(spawn_llm_server, llm_model):
    server = spawn_llm_server(api_key="sk-test-key-123")
    with Transport(server.base_url, timeout=10) as transport, pytest.raises(AuthError):
        detect_endpoint(transport)
    # A generous timeout: a freshly spawned server's first answer is slow on a busy machine.
    with Transport(server.base_url, api_key="sk-test-key-123", timeout=60) as transport:
        info = detect_endpoint(transport)
        assert info.kind == LLAMA_CPP
        reply = OpenAIProvider(transport, llm_model).chat(
            ChatRequest(messages=[{"role": "user", "content": "Hi"}], max_tokens=4)
        )
        assert reply.completion_tokens


@pytest.mark.llm
def test_an_idle_connection_closed_by_llama_cpp_is_reused_transparently(provider):
    request = ChatRequest(messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    provider.chat(request)
    time.sleep(6.0)  # llama.cpp drops keep-alive connections idle for about 5 s
    assert provider.chat_stream(request).completion_tokens == 2


def test_a_keep_alive_connection_dropped_mid_reuse_is_retried_once():
    listener, connections = race_server()
    try:
        port = listener.getsockname()[1]
        with Transport(f"http://127.0.0.1:{port}", timeout=5) as transport:
            assert transport.request("GET", "/v1/models").json()["data"][0]["id"] == "m"
            assert transport.request("GET", "/v1/models").status_code == 200
            assert transport.reconnects == 1
        assert len(connections) == 2
    finally:
        listener.close()


def test_base_urls_are_normalised():
    assert normalize_base_url("localhost:8080") == "http://localhost:8080"
    assert normalize_base_url("https://api.example.com/v1/") == "https://api.example.com"
    assert normalize_base_url("https://openrouter.ai/api/v1") == "https://openrouter.ai/api"
    with pytest.raises(UsageError):
        normalize_base_url("ftp://example.com")


def test_think_blocks_are_kept_apart_from_the_answer():
    assert split_think("<think>add 2 and 2</think>The answer is 4.") == (
        "The answer is 4.",
        "add 2 and 2",
    )
    assert split_think("no reasoning here") == ("no reasoning here", "")
    assert split_think("<think>cut off mid-thought") == ("", "cut off mid-thought")


def test_think_tags_split_across_stream_chunks_are_recognised():
    from worker.engine.providers.base import ThinkSplitter

    splitter = ThinkSplitter()
    released = [splitter.feed(piece) for piece in ["<th", "ink>weigh it", "</thi", "nk>Done."]]
    assert "".join(content for content, _ in released) == "Done."
    assert splitter.finish() == ("Done.", "weigh it")


def test_ollama_counters_become_server_timings():
    from worker.engine.providers.ollama import ollama_timings

    final = {
        "done": True,
        "prompt_eval_count": 120,
        "prompt_eval_duration": 400_000_000,
        "eval_count": 64,
        "eval_duration": 800_000_000,
    }
    timings = ollama_timings(final)
    assert timings.prompt_ms == 400.0
    assert timings.prompt_per_second == pytest.approx(300.0)
    assert timings.predicted_per_second == pytest.approx(80.0)
    assert timings.cache_n is None  # no cached count: the whole prompt, as Ollama gave it


def test_ollama_s_cached_prompt_tokens_are_not_counted_as_evaluated():
    from worker.engine.providers.ollama import ollama_timings

    # prompt_eval_count is the whole prompt, the cached part included (Ollama's API).
    final = {
        "done": True,
        "prompt_eval_count": 4120,
        "prompt_eval_cached_count": 4000,
        "prompt_eval_duration": 400_000_000,
        "eval_count": 64,
        "eval_duration": 800_000_000,
    }
    timings = ollama_timings(final)
    assert (timings.prompt_n, timings.cache_n) == (120, 4000)
    assert timings.prompt_per_second == pytest.approx(300.0)


def test_llama_cpp_speculation_counters_reach_the_trial_record():
    """llama-server's timings carry draft_n and draft_n_accepted when it speculates: the
    trial keeps them, so the site can bound the run by its own acceptance."""
    from worker.engine.metrics import request_metrics
    from worker.engine.providers.base import ChatResponse
    from worker.engine.providers.openai_compat import _timings
    from worker.rules.timings import StreamTiming

    def trial(timings: dict) -> dict:
        clock = StreamTiming(first_token_ms=50.0, first_content_ms=50.0, last_token_ms=450.0)
        response = ChatResponse(server=_timings(timings), timing=clock, streamed=True)
        return request_metrics(response)["server"]

    plain = {"prompt_n": 20, "prompt_ms": 10.0, "predicted_n": 64, "predicted_ms": 400.0}
    server = trial({**plain, "draft_n": 48, "draft_n_accepted": 30})
    assert (server["draft_n"], server["draft_n_accepted"]) == (48, 30)
    assert "draft_n" not in trial(plain)
