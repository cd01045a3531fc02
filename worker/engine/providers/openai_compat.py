"""OpenAI-compatible ``/v1/chat/completions`` provider (llama.cpp, vLLM, LM Studio, cloud APIs)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import httpx

from ...rules.timings import ServerTimings, StreamTiming
from ..errors import ProtocolError, RequestTimeout, StreamInterrupted
from ..loops import FINISH_REASON as LOOP_FINISH
from ..loops import LoopWatch
from ..transport import Transport, map_transport_error, raise_for_status, timed_lines
from .base import ChatRequest, ChatResponse, ChunkCallback, OutputSplit, ToolCall, parse_arguments

# Every OpenAI-compatible server answers this cheaply; it opens the connection a timed stream uses.
WARM_PATH = "/v1/models"


class OpenAIProvider:
    """Chat over the OpenAI wire format, streamed or not."""

    api = "openai"

    def __init__(self, transport: Transport, model: str, *, supports_ignore_eos: bool = False):
        self.transport = transport
        self.model = model
        # Only some servers accept ignore_eos (llama.cpp, vLLM); strict APIs reject unknown keys.
        self.supports_ignore_eos = supports_ignore_eos

    def close(self) -> None:
        self.transport.close()

    def ready(self) -> None:
        self.transport.ready_for_stream(WARM_PATH)

    def list_models(self) -> list[str]:
        response = self.transport.request("GET", "/v1/models")
        try:
            data = response.json().get("data") or []
        except (ValueError, AttributeError) as exc:
            raise ProtocolError("/v1/models did not return an OpenAI model list") from exc
        return [item["id"] for item in data if isinstance(item, dict) and item.get("id")]

    def _body(self, request: ChatRequest, *, stream: bool) -> dict:
        body: dict = {"model": self.model, "messages": request.messages, "stream": stream}
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.seed is not None:
            body["seed"] = request.seed
        if request.tools:
            body["tools"] = request.tools
            if request.tool_choice is not None:
                body["tool_choice"] = request.tool_choice
        if request.ignore_eos and self.supports_ignore_eos:
            body["ignore_eos"] = True
        if stream:
            body["stream_options"] = {"include_usage": True}
        body.update(request.extra)
        return body

    def chat(self, request: ChatRequest) -> ChatResponse:
        """Non-streaming request; only wall time is measured on the client."""
        body = self._body(request, stream=False)
        t0 = time.perf_counter()
        response = self.transport.request(
            "POST", "/v1/chat/completions", json=body, model=self.model
        )
        wall_ms = (time.perf_counter() - t0) * 1000
        try:
            data = response.json()
            choice = (data.get("choices") or [{}])[0]
            message = choice.get("message") or {}
        except (ValueError, AttributeError, IndexError) as exc:
            raise ProtocolError("chat completion answer is not OpenAI-shaped") from exc
        result = ChatResponse(model=data.get("model"), wall_ms=wall_ms, streamed=False)
        split = OutputSplit()
        split.take(
            text=message.get("content") or "",
            reasoning=message.get("reasoning_content") or message.get("reasoning") or "",
        )
        result.content, result.reasoning = split.finish()
        result.ended_in_reasoning = split.ended_in_reasoning
        for index, call in enumerate(message.get("tool_calls") or []):
            fn = call.get("function") or {}
            args, raw = parse_arguments(fn.get("arguments"))
            result.tool_calls.append(
                ToolCall(call.get("id") or f"call_{index}", fn.get("name") or "", args, raw)
            )
        result.finish_reason = choice.get("finish_reason")
        _apply_usage(result, data.get("usage"))
        result.server = _timings(data.get("timings"))
        return result

    def chat_stream(
        self, request: ChatRequest, on_chunk: ChunkCallback | None = None
    ) -> ChatResponse:
        """Streamed request with a clock reading for every SSE event that carries output."""
        body = self._body(request, stream=True)
        stream = _Stream(on_chunk, watch=LoopWatch() if request.stop_loops else None)
        saw_done = False
        with self.transport.stream(
            "POST", "/v1/chat/completions", json=body, model=self.model, warm_path=WARM_PATH
        ) as sent:
            stream.t_sent = stream.timing.start(sent)
            try:
                for now, line in timed_lines(sent.response):
                    if not line.startswith(b"data:"):
                        continue  # blank separators, SSE comments and event/id fields
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        saw_done = True
                        break
                    stream.timing.event_count += 1
                    try:
                        event = json.loads(payload.decode())  # str: no encoding sniffing
                    except ValueError as exc:
                        raise ProtocolError(f"unparseable SSE event: {_head(payload)!r}") from exc
                    if not isinstance(event, dict):
                        raise ProtocolError(f"SSE event is not an object: {_head(payload)!r}")
                    if isinstance(event.get("error"), dict | str):
                        _raise_stream_error(event["error"], self.model)
                    if stream.take(event, now):
                        break  # a loop: closing the stream makes the server stop generating
            except httpx.TimeoutException as exc:
                raise RequestTimeout(
                    f"no data from the endpoint for {self.transport.timeout.read:.0f} s "
                    f"after {stream.token_chunks} chunks"
                ) from exc
            except httpx.HTTPError as exc:
                raise StreamInterrupted(
                    f"stream dropped after {stream.token_chunks} output chunks "
                    f"({map_transport_error(exc, during_stream=True).message})"
                ) from exc
            stream.timing.done_ms = round((time.perf_counter() - stream.t_sent) * 1000, 3)
        if not saw_done and stream.result.finish_reason is None:
            raise StreamInterrupted(
                f"stream ended without a finish after {stream.token_chunks} chunks"
            )
        return stream.response()


@dataclass
class _Stream:
    """One streamed answer as its SSE events arrive: text, reasoning, tool calls, usage, and
    the clock reading of every event that carried output."""

    on_chunk: ChunkCallback | None
    watch: LoopWatch | None = None
    t_sent: float = 0.0
    result: ChatResponse = field(default_factory=lambda: ChatResponse(streamed=True))
    timing: StreamTiming = field(default_factory=StreamTiming)
    split: OutputSplit = field(default_factory=OutputSplit)
    calls: dict[int, dict] = field(default_factory=dict)
    usage: dict | None = None
    timings: dict | None = None
    token_chunks: int = 0

    def take(self, event: dict, now: float) -> bool:
        """Fold in one SSE event; True when the answer fell into a loop and should end."""
        self.usage = event.get("usage") or self.usage
        self.timings = event.get("timings") or self.timings
        self.result.model = event.get("model") or self.result.model
        produced = content_now = looped = False
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            calls = delta.get("tool_calls") or []
            for call in calls:
                _merge_tool_delta(self.calls, call)
            output, answer = self.split.take(
                text=delta.get("content") or "",
                reasoning=delta.get("reasoning_content") or delta.get("reasoning") or "",
                tool_call=bool(calls),
            )
            produced, content_now = produced or output, content_now or answer
            if choice.get("finish_reason"):
                self.result.finish_reason = choice["finish_reason"]
            # Only the answer is watched: thinking is bounded by its own budget (reasoning.py),
            # and a long deliberate chain of thought must not read as a loop.
            content = delta.get("content") or ""
            if content and self.watch is not None and not self.split.splitter.in_think:
                looped = self.watch.feed(content) or looped
        if produced:
            self._produced(now, content_now)
        if looped:
            self.result.finish_reason = LOOP_FINISH
        return looped

    def _produced(self, now: float, content_now: bool) -> None:
        self.token_chunks = self.timing.mark_output(now, self.t_sent, content=content_now)
        if self.on_chunk is not None:
            self.on_chunk(self.token_chunks, now - self.t_sent)

    def response(self) -> ChatResponse:
        result = self.result
        result.content, result.reasoning = self.split.finish(self.timing)
        result.ended_in_reasoning = self.split.ended_in_reasoning
        result.tool_calls = [_finish_tool_call(i, c) for i, c in sorted(self.calls.items())]
        _apply_usage(result, self.usage)
        if self.watch is not None and self.watch.loop is not None:
            result.loop = self.watch.record()
            if result.completion_tokens is None:
                # The stream ended before the usage event: llama.cpp sends about one token per
                # output event, so the events received are the tokens generated.
                result.completion_tokens = self.token_chunks
        result.server = _timings(self.timings)
        result.timing = self.timing
        result.wall_ms = self.timing.done_ms
        return result


def _head(line: bytes) -> str:
    """The start of a line the server sent, for an error message."""
    return line[:80].decode(errors="replace")


def _raise_stream_error(error: object, model: str) -> None:
    message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
    code = error.get("code") if isinstance(error, dict) else None
    status = code if isinstance(code, int) else 500
    fake = httpx.Response(status, json={"error": {"message": message}})
    raise_for_status(fake, model=model)
    raise StreamInterrupted(f"server reported an error mid-stream: {message}")


def _merge_tool_delta(calls: dict[int, dict], delta: dict) -> None:
    index = delta.get("index", len(calls))
    slot = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
    if delta.get("id"):
        slot["id"] = delta["id"]
    fn = delta.get("function") or {}
    if fn.get("name"):
        slot["name"] += fn["name"]
    args = fn.get("arguments")
    if isinstance(args, dict):
        slot["arguments"] = json.dumps(args)
    elif args:
        slot["arguments"] += args


def _finish_tool_call(index: int, slot: dict) -> ToolCall:
    args, raw = parse_arguments(slot["arguments"])
    return ToolCall(slot["id"] or f"call_{index}", slot["name"], args, raw)


def _apply_usage(result: ChatResponse, usage: dict | None) -> None:
    if not isinstance(usage, dict):
        return
    result.prompt_tokens = usage.get("prompt_tokens")
    result.completion_tokens = usage.get("completion_tokens")
    details = usage.get("completion_tokens_details") or {}
    result.reasoning_tokens = details.get("reasoning_tokens")
    prompt_details = usage.get("prompt_tokens_details") or {}
    result.cached_tokens = prompt_details.get("cached_tokens")


def _timings(raw: dict | None) -> ServerTimings | None:
    """llama.cpp's ``timings`` block, the server's own view of the request."""
    if not isinstance(raw, dict):
        return None
    return ServerTimings(
        source="llama.cpp",
        prompt_n=raw.get("prompt_n"),
        prompt_ms=raw.get("prompt_ms"),
        predicted_n=raw.get("predicted_n"),
        predicted_ms=raw.get("predicted_ms"),
        cache_n=raw.get("cache_n"),
        prompt_per_second=raw.get("prompt_per_second"),
        predicted_per_second=raw.get("predicted_per_second"),
        draft_n=raw.get("draft_n"),
        draft_n_accepted=raw.get("draft_n_accepted"),
    )
