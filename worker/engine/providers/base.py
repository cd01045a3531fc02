"""Provider-neutral request/response types and the <think> splitter."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Protocol

from ...rules.timings import ServerTimings, StreamTiming

# Called for every chunk that carried generated output: (token chunks so far, seconds since sent).
ChunkCallback = Callable[[int, float], None]


@dataclass
class ChatRequest:
    """One chat request, in OpenAI message format."""

    messages: list[dict]
    max_tokens: int | None = None
    temperature: float | None = 0.0
    tools: list[dict] | None = None
    tool_choice: str | dict | None = None
    ignore_eos: bool = False
    seed: int | None = None
    extra: dict = field(default_factory=dict)
    # End a streamed answer that falls into a loop (worker.engine.loops): quality tasks only;
    # speed's fixed-length outputs may repeat by design.
    stop_loops: bool = False


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict | None
    raw_arguments: str


@dataclass
class ChatResponse:
    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    server: ServerTimings | None = None
    timing: StreamTiming | None = None
    wall_ms: float | None = None
    streamed: bool = False
    # The last output was reasoning (no answer after it, or an unclosed <think>): a "length"
    # finish then cut the thinking, not the answer.
    ended_in_reasoning: bool = False
    # The loop that ended the stream early (finish_reason "loop"): span, repeats, chunk.
    loop: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)


class Provider(Protocol):
    """What the orchestrator needs from a transport-level provider."""

    api: str
    model: str

    def list_models(self) -> list[str]: ...

    def chat(self, request: ChatRequest) -> ChatResponse: ...

    def chat_stream(
        self, request: ChatRequest, on_chunk: ChunkCallback | None = None
    ) -> ChatResponse: ...

    def ready(self) -> None:
        """Open what the next timed stream needs, outside its clock (a sweep round's barrier)."""

    def close(self) -> None: ...


def parse_arguments(raw: object) -> tuple[dict | None, str]:
    """Tool-call arguments arrive as a JSON string (OpenAI) or an object (Ollama)."""
    if isinstance(raw, dict):
        return raw, json.dumps(raw)
    text = "" if raw is None else str(raw)
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return None, text
    return (value if isinstance(value, dict) else None), text


class ThinkSplitter:
    """Separate ``<think>…</think>`` reasoning from the answer in a stream of text pieces.

    Tags may be split across chunks, so a possible tag prefix is held back until it is decided.
    """

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self) -> None:
        self.in_think = False
        self._pending = ""
        self.content: list[str] = []
        self.reasoning: list[str] = []

    def feed(self, text: str) -> tuple[str, str]:
        """Add a piece; return the (answer, reasoning) text it released."""
        buf = self._pending + text
        self._pending = ""
        out_content: list[str] = []
        out_reason: list[str] = []
        while buf:
            tag = self.CLOSE if self.in_think else self.OPEN
            idx = buf.find(tag)
            if idx >= 0:
                (out_reason if self.in_think else out_content).append(buf[:idx])
                buf = buf[idx + len(tag) :]
                self.in_think = not self.in_think
                continue
            keep = _partial_suffix(buf, tag)
            (out_reason if self.in_think else out_content).append(buf[: len(buf) - keep])
            self._pending = buf[len(buf) - keep :]
            break
        content, reasoning = "".join(out_content), "".join(out_reason)
        self.content.append(content)
        self.reasoning.append(reasoning)
        return content, reasoning

    def finish(self) -> tuple[str, str]:
        """Flush held-back text and return the full (answer, reasoning)."""
        if self._pending:
            (self.reasoning if self.in_think else self.content).append(self._pending)
            self._pending = ""
        return "".join(self.content).strip(), "".join(self.reasoning).strip()


class OutputSplit:
    """One answer's output as it arrives: reasoning apart from the answer, in text and in events.

    Reasoning is what the server sends as such (``reasoning_content``, ``reasoning``, Ollama's
    ``thinking``) plus inline ``<think>`` text. An event whose text only held back a possible tag
    is counted once a later event settles which side it was on.
    """

    def __init__(self) -> None:
        self.splitter = ThinkSplitter()
        self.reasoning_parts: list[str] = []
        self.reasoning_events = 0
        self.answer_events = 0
        self.last_kind: str | None = None
        self._undecided = 0

    def take(
        self, *, text: str = "", reasoning: str = "", tool_call: bool = False
    ) -> tuple[bool, bool]:
        """Fold in one event's output; return (it carried output, it carried answer to show)."""
        if not (text or reasoning or tool_call):
            return False, False
        was_thinking = self.splitter.in_think
        answer, think = self.splitter.feed(text) if text else ("", "")
        if reasoning:
            self.reasoning_parts.append(reasoning)
        if answer or tool_call:
            self._count("answer")
            if reasoning or think or was_thinking:
                self.reasoning_events += 1  # a transition event held tokens of both
        elif reasoning or think or was_thinking or self.splitter.in_think:
            self._count("reasoning")
        else:
            self._undecided += 1  # only part of a possible tag so far
        return True, bool(answer.strip()) or tool_call

    def _count(self, kind: str, events: int = 1) -> None:
        """Count ``events`` of ``kind``, and the held-back events before them with them."""
        total, self._undecided = events + self._undecided, 0
        if kind == "answer":
            self.answer_events += total
        else:
            self.reasoning_events += total
        self.last_kind = kind

    def finish(self, timing: StreamTiming | None = None) -> tuple[str, str]:
        """The full (answer, reasoning); the event counts go into ``timing`` when given."""
        if self._undecided:
            # Held-back text is released on the side the splitter is on.
            self._count("reasoning" if self.splitter.in_think else "answer", events=0)
        content, think = self.splitter.finish()
        reasoning = "".join(self.reasoning_parts).strip()
        reasoning = "\n".join(part for part in (reasoning, think) if part)
        if timing is not None:
            timing.reasoning_events = self.reasoning_events
            timing.answer_events = self.answer_events
        return content, reasoning

    @property
    def ended_in_reasoning(self) -> bool:
        return self.splitter.in_think or self.last_kind == "reasoning"


def _partial_suffix(text: str, tag: str) -> int:
    if "<" not in text[1 - len(tag) :]:
        return 0  # every tag starts with "<": the usual chunk, checked once instead of 6 times
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


def split_think(text: str) -> tuple[str, str]:
    """Split a complete text into (answer, reasoning)."""
    splitter = ThinkSplitter()
    splitter.feed(text)
    return splitter.finish()
