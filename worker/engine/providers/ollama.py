"""Ollama native ``/api/chat`` provider: streamed NDJSON with the server's own counters."""

from __future__ import annotations

import json
import time

import httpx

from ...rules.timings import ServerTimings, StreamTiming
from ..errors import ProtocolError, RequestTimeout, StreamInterrupted
from ..transport import Transport, map_transport_error, timed_lines
from .base import ChatRequest, ChatResponse, ChunkCallback, OutputSplit, ToolCall, parse_arguments

_NS_PER_MS = 1_000_000
# A cheap request that leaves a kept-alive connection open before a timed stream.
WARM_PATH = "/api/version"


class OllamaProvider:
    """Chat over Ollama's native API, which reports prompt and eval counts and durations."""

    api = "ollama"

    def __init__(self, transport: Transport, model: str, *, num_ctx: int | None = None):
        self.transport = transport
        self.model = model
        # Ollama truncates prompts silently at num_ctx; the speed suite asks for enough room.
        self.num_ctx = num_ctx

    def close(self) -> None:
        self.transport.close()

    def ready(self) -> None:
        self.transport.ready_for_stream(WARM_PATH)

    def list_models(self) -> list[str]:
        response = self.transport.request("GET", "/api/tags")
        try:
            models = response.json().get("models") or []
        except (ValueError, AttributeError) as exc:
            raise ProtocolError("/api/tags did not return an Ollama model list") from exc
        names = (m.get("name") or m.get("model") for m in models if isinstance(m, dict))
        return [str(name) for name in names if name]

    def _body(self, request: ChatRequest, *, stream: bool) -> dict:
        options: dict = {}
        if request.max_tokens is not None:
            options["num_predict"] = request.max_tokens
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.seed is not None:
            options["seed"] = request.seed
        if self.num_ctx:
            options["num_ctx"] = self.num_ctx
        options.update(request.extra.get("options", {}))
        body: dict = {
            "model": self.model,
            "messages": [_to_ollama_message(m) for m in request.messages],
            "stream": stream,
            "options": options,
        }
        if request.tools:
            body["tools"] = request.tools
        for key in ("think", "keep_alive", "format"):
            if key in request.extra:
                body[key] = request.extra[key]
        return body

    def chat(self, request: ChatRequest) -> ChatResponse:
        t0 = time.perf_counter()
        response = self.transport.request(
            "POST", "/api/chat", json=self._body(request, stream=False), model=self.model
        )
        wall_ms = (time.perf_counter() - t0) * 1000
        try:
            data = response.json()
        except ValueError as exc:
            raise ProtocolError("Ollama answered with something other than JSON") from exc
        result = ChatResponse(wall_ms=wall_ms, streamed=False)
        state = _State()
        state.add(data)
        state.apply(result)
        return result

    def chat_stream(
        self, request: ChatRequest, on_chunk: ChunkCallback | None = None
    ) -> ChatResponse:
        result = ChatResponse(streamed=True)
        timing = StreamTiming()
        state = _State()
        token_chunks = 0
        with self.transport.stream(
            "POST",
            "/api/chat",
            json=self._body(request, stream=True),
            model=self.model,
            warm_path=WARM_PATH,
        ) as sent:
            t_sent = timing.start(sent)
            try:
                for now, line in timed_lines(sent.response):
                    if not line.strip():
                        continue
                    try:
                        event = json.loads(line.decode())  # str: no encoding sniffing
                    except ValueError as exc:
                        head = line[:80].decode(errors="replace")
                        raise ProtocolError(f"unparseable NDJSON line: {head!r}") from exc
                    if not isinstance(event, dict):
                        head = line[:80].decode(errors="replace")
                        raise ProtocolError(f"NDJSON line is not an object: {head!r}")
                    if event.get("error"):
                        raise StreamInterrupted(f"Ollama reported: {event['error']}")
                    timing.event_count += 1
                    produced, content_now = state.add(event)
                    if produced:
                        token_chunks = timing.mark_output(now, t_sent, content=content_now)
                        if on_chunk is not None:
                            on_chunk(token_chunks, now - t_sent)
                    if event.get("done"):
                        break
            except httpx.TimeoutException as exc:
                raise RequestTimeout(f"no data from Ollama after {token_chunks} chunks") from exc
            except httpx.HTTPError as exc:
                raise StreamInterrupted(
                    f"stream dropped after {token_chunks} output chunks "
                    f"({map_transport_error(exc, during_stream=True).message})"
                ) from exc
            timing.done_ms = round((time.perf_counter() - t_sent) * 1000, 3)
        if not state.done:
            raise StreamInterrupted(f"stream ended before done after {token_chunks} chunks")
        state.apply(result, timing)
        result.timing = timing
        result.wall_ms = timing.done_ms
        return result


class _State:
    """Accumulates NDJSON events (or the single non-streamed answer) into a response."""

    def __init__(self) -> None:
        self.split = OutputSplit()
        self.calls: list[ToolCall] = []
        self.final: dict = {}
        self.model: str | None = None
        self.done = False

    def add(self, event: dict) -> tuple[bool, bool]:
        """Fold one event in; return (carried output, carried answer output)."""
        self.model = event.get("model") or self.model
        message = event.get("message") or {}
        calls = message.get("tool_calls") or []
        for index, call in enumerate(calls):
            fn = call.get("function") or {}
            args, raw = parse_arguments(fn.get("arguments"))
            call_id = call.get("id") or f"call_{len(self.calls) + index}"
            self.calls.append(ToolCall(call_id, fn.get("name") or "", args, raw))
        produced, content_now = self.split.take(
            text=message.get("content") or "",
            reasoning=message.get("thinking") or "",
            tool_call=bool(calls),
        )
        if event.get("done"):
            self.done = True
            self.final = event
        return produced, content_now

    def apply(self, result: ChatResponse, timing: StreamTiming | None = None) -> None:
        result.content, result.reasoning = self.split.finish(timing)
        result.ended_in_reasoning = self.split.ended_in_reasoning
        result.tool_calls = self.calls
        result.model = self.model
        final = self.final
        result.finish_reason = final.get("done_reason") or ("stop" if self.done else None)
        result.prompt_tokens = final.get("prompt_eval_count")
        result.cached_tokens = _cached(final)
        result.completion_tokens = final.get("eval_count")
        result.server = ollama_timings(final) if final else None


def ollama_timings(final: dict) -> ServerTimings:
    """Convert Ollama's nanosecond counters to the engine's server-timing record.

    ``prompt_eval_count`` is the whole prompt, cached tokens included; where Ollama also reports
    ``prompt_eval_cached_count``, ``prompt_n`` is what it evaluated, as llama.cpp's is.
    """
    prompt_n, prompt_ns = final.get("prompt_eval_count"), final.get("prompt_eval_duration")
    eval_n, eval_ns = final.get("eval_count"), final.get("eval_duration")
    cached = _cached(final)
    if cached is not None and isinstance(prompt_n, int):
        prompt_n = max(prompt_n - cached, 0)
    return ServerTimings(
        source="ollama",
        prompt_n=prompt_n,
        prompt_ms=prompt_ns / _NS_PER_MS if prompt_ns else None,
        predicted_n=eval_n,
        predicted_ms=eval_ns / _NS_PER_MS if eval_ns else None,
        cache_n=cached,
        prompt_per_second=prompt_n / (prompt_ns / 1e9) if prompt_n and prompt_ns else None,
        predicted_per_second=eval_n / (eval_ns / 1e9) if eval_n and eval_ns else None,
        load_ms=final["load_duration"] / _NS_PER_MS if final.get("load_duration") else None,
    )


def _cached(final: dict) -> int | None:
    """Prompt tokens Ollama served from its cache, where it says (``prompt_eval_cached_count``)."""
    cached = final.get("prompt_eval_cached_count")
    return cached if isinstance(cached, int) and not isinstance(cached, bool) else None


def _to_ollama_message(message: dict) -> dict:
    """Ollama wants tool-call arguments as objects, not JSON strings."""
    if not message.get("tool_calls"):
        return message
    calls = []
    for call in message["tool_calls"]:
        fn = dict(call.get("function") or {})
        args, _ = parse_arguments(fn.get("arguments"))
        fn["arguments"] = args if args is not None else {}
        calls.append({"function": fn})
    return {**message, "tool_calls": calls}
