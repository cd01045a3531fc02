"""Prompt and parse adapters: how tools are offered to a model and how its calls are read back.

- ``raw``: native OpenAI-style ``tools``; nothing is changed.
- ``xml-tool-call``: tools listed in a system prompt; calls come back as
  ``<tool_call>{json}</tool_call>`` (the format Hermes-style models are trained on).
- ``xml-function-call``: the same with ``<function_call>`` tags.
- ``think-xml-tool-call``: reasoning inside ``<think>…</think>`` first (removed from the answer),
  then ``<tool_call>`` tags.

These are prompt formats, not programs: the real agent programs (Aider, Hermes Agent,
mini-swe-agent) are in ``worker.engine.matrix``. The names (formats, programs, the formats' old
names) are rules: worker.rules.harnesses.

Parsing is forgiving of what small models emit: an unclosed final tag, JSON in a code fence,
``name``/``function``/``tool`` and ``arguments``/``args``/``parameters`` keys, arguments given as
a JSON string. A block that still does not parse is dropped from the content and counted in
``malformed``, never turned into a guessed call. Native tool calls are kept.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace

from ..rules.harnesses import FORMATS, TAGS, THINK, is_program
from .providers.base import ChatRequest, ChatResponse, ChunkCallback, Provider, ToolCall

_THINK_PROMPT = (
    "First think step by step inside <think> and </think>. After </think>, write only your answer."
)


@dataclass
class Parsed:
    """A response after the harness has read it, with what it found."""

    response: ChatResponse
    malformed: int = 0
    reasoning_blocks: int = 0
    notes: list[str] = field(default_factory=list)


def _tools_prompt(tools: list[dict], tag: str) -> str:
    listing = "\n".join(json.dumps(t.get("function", t), ensure_ascii=False) for t in tools)
    return (
        "You can call these tools:\n<tools>\n"
        f"{listing}\n</tools>\n"
        f'To call a tool, write <{tag}>{{"name": <tool name>, "arguments": {{...}}}}</{tag}> '
        "with one tag per call. If no tool is needed, answer normally."
    )


def _as_text_turns(messages: list[dict], tag: str) -> list[dict]:
    """A native tool transcript rewritten in tags, for servers that were never sent ``tools``."""
    out = []
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            calls = "".join(
                f'<{tag}>{{"name": {json.dumps(c["function"]["name"])}, '
                f'"arguments": {c["function"].get("arguments") or "{}"}}}</{tag}>'
                for c in message["tool_calls"]
            )
            out.append({"role": "assistant", "content": (message.get("content") or "") + calls})
        elif message.get("role") == "tool":
            out.append(
                {
                    "role": "user",
                    "content": f"<tool_response>{message.get('content', '')}</tool_response>",
                }
            )
        else:
            out.append(message)
    return out


def prepare(harness: str, request: ChatRequest) -> ChatRequest:
    """The request as this harness sends it."""
    if harness not in FORMATS:
        raise ValueError(f"unknown harness {harness!r}; choose one of {', '.join(FORMATS)}")
    if harness == "raw":
        return request
    parts = []
    if harness == THINK:
        parts.append(_THINK_PROMPT)
    if request.tools:
        parts.append(_tools_prompt(request.tools, TAGS[harness]))
    messages = _as_text_turns(list(request.messages), TAGS[harness])
    if not parts:
        return replace(request, messages=messages)
    system = [{"role": "system", "content": "\n\n".join(parts)}]
    # The task's own system prompt follows ours, so its instructions still apply.
    return replace(request, messages=system + messages, tools=None, tool_choice=None)


def _block_json(text: str) -> object:
    body = text.strip()
    fenced = re.match(r"^```[a-zA-Z]*\s*(.*?)\s*(?:```)?$", body, re.DOTALL)
    if fenced:
        body = fenced.group(1)
    try:
        return json.loads(body)
    except ValueError:
        # Small models often add a trailing brace or text after the object.
        start = body.find("{")
        if start < 0:
            return None
        try:
            value, _ = json.JSONDecoder().raw_decode(body, start)
        except ValueError:
            return None
        return value


def _to_call(value: object, index: int) -> ToolCall | None:
    if not isinstance(value, dict):
        return None
    name = value.get("name") or value.get("function") or value.get("tool")
    if isinstance(name, dict):  # {"function": {"name": ..., "arguments": ...}}
        value, name = name, name.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    args = value.get("arguments", value.get("args", value.get("parameters", {})))
    raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            args = None
    if args is not None and not isinstance(args, dict):
        args = None
    return ToolCall(id=f"harness_{index}", name=name.strip(), arguments=args, raw_arguments=raw)


def _split_tags(text: str, tag: str) -> tuple[str, list[str]]:
    """Content without the tagged blocks, and the blocks (an unclosed last tag runs to the end)."""
    pattern = re.compile(rf"<{tag}>(.*?)(?:</{tag}>|(?=<{tag}>)|$)", re.DOTALL | re.IGNORECASE)
    blocks = [m.group(1) for m in pattern.finditer(text)]
    content = pattern.sub("", text)
    content = re.sub(rf"</{tag}>", "", content, flags=re.IGNORECASE)
    return content.strip(), blocks


def _strip_think(text: str) -> tuple[str, str, int]:
    blocks = re.findall(r"<think>(.*?)</think>", text, re.DOTALL | re.IGNORECASE)
    rest = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL | re.IGNORECASE)
    if re.search(r"<think>", rest, re.IGNORECASE):
        # Never closed (often cut off by max_tokens): all of it is reasoning, none is answer.
        head, _, tail = re.split(r"(<think>)", rest, maxsplit=1, flags=re.IGNORECASE)
        blocks.append(tail)
        rest = head
    elif re.search(r"</think>", rest, re.IGNORECASE):
        # Opening tag dropped by the chat template: everything before the close is reasoning.
        head, _, rest = re.split(r"(</think>)", rest, maxsplit=1, flags=re.IGNORECASE)
        blocks.append(head)
    return rest.strip(), "\n".join(b.strip() for b in blocks), len(blocks)


def parse(harness: str, response: ChatResponse) -> Parsed:
    """Read tool calls (and, for ``think-xml-tool-call``, reasoning) out of the response text."""
    if harness == "raw":
        return Parsed(response)
    content = response.content
    reasoning, blocks_seen = response.reasoning, 0
    if harness == THINK:
        content, thought, blocks_seen = _strip_think(content)
        reasoning = "\n".join(x for x in (response.reasoning, thought) if x)
    content, blocks = _split_tags(content, TAGS[harness])
    calls = list(response.tool_calls)
    malformed = 0
    for block in blocks:
        call = _to_call(_block_json(block), len(calls))
        if call is None:
            malformed += 1
        else:
            calls.append(call)
    parsed = replace(response, content=content, reasoning=reasoning, tool_calls=calls)
    notes = [f"{malformed} malformed <{TAGS[harness]}> block(s) ignored"] if malformed else []
    return Parsed(parsed, malformed=malformed, reasoning_blocks=blocks_seen, notes=notes)


class HarnessProvider:
    """A provider seen through a harness: requests are prepared and responses parsed.

    Quality suites talk to this; the speed suite keeps the bare provider, because a harness
    prompt would change the calibrated prompt lengths it measures.
    """

    def __init__(self, provider: Provider, harness: str) -> None:
        if harness not in FORMATS:
            raise ValueError(f"unknown harness {harness!r}; choose one of {', '.join(FORMATS)}")
        self.inner = provider
        self.harness = harness
        self.malformed = 0

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def _read(self, response: ChatResponse) -> ChatResponse:
        parsed = parse(self.harness, response)
        self.malformed += parsed.malformed
        return parsed.response

    def chat(self, request: ChatRequest) -> ChatResponse:
        return self._read(self.inner.chat(prepare(self.harness, request)))

    def chat_stream(
        self, request: ChatRequest, on_chunk: ChunkCallback | None = None
    ) -> ChatResponse:
        return self._read(self.inner.chat_stream(prepare(self.harness, request), on_chunk))

    def close(self) -> None:
        self.inner.close()


def with_harness(provider: Provider, harness: str) -> Provider:
    """``provider`` itself for ``raw`` and the programs (they bring their own), else wrapped."""
    return (
        provider if harness == "raw" or is_program(harness) else HarnessProvider(provider, harness)
    )
