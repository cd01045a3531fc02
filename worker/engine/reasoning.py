"""Reasoning models: the reasoning/answer token split of an answer and truncation inside the
thinking (docs/metrics.md, "Reasoning models"). The limits and the summary are rules
(worker.rules.reasoning)."""

from __future__ import annotations

from typing import Any

from .providers.base import ChatResponse

TRUNCATED_IN_REASONING_HINT = (
    "The answer was cut off while the model was still thinking; "
    "raise --thinking-budget (or --max-tokens) to give it room to answer."
)
# The chars-per-token share used only when neither the server nor the stream counts tokens.
_CHARS_PER_TOKEN = 4


def reasons(response: ChatResponse) -> bool:
    """Whether an answer shows a model that reasons: reasoning text, or an open <think>."""
    return bool(response.reasoning.strip()) or response.ended_in_reasoning


def truncated_in_reasoning(response: ChatResponse) -> bool:
    """A "length" finish before any answer: the limit cut the thinking, not the answer."""
    if response.finish_reason != "length" or response.tool_calls:
        return False
    no_answer = not response.content.strip() and bool(response.reasoning.strip())
    return response.ended_in_reasoning or no_answer


def token_split(response: ChatResponse) -> dict[str, Any]:
    """Reasoning and answer tokens of one answer, and where the split comes from.

    "server": the server's ``completion_tokens_details.reasoning_tokens``; "stream": output
    events of each kind (about one token each on llama.cpp and Ollama); "estimated": the
    completion count shared by characters (a non-streamed answer from a server that gives none).
    """
    completion = response.completion_tokens
    timing = response.timing
    server = response.reasoning_tokens
    streamed_reasoning = timing.reasoning_events if timing is not None else 0
    # A server that always says 0 (some do) is not believed against reasoning seen in the stream.
    if server is not None and (server > 0 or not streamed_reasoning):
        answer = completion - server if completion is not None else None
        return _split(server, answer, "server")
    if timing is not None and timing.token_chunk_ms:
        return _split(timing.reasoning_events, timing.answer_events, "stream")
    reasoning_chars, answer_chars = len(response.reasoning), len(response.content)
    if not reasoning_chars:
        return _split(0, completion, "estimated")
    if completion:
        share = reasoning_chars / (reasoning_chars + answer_chars)
        estimate = round(completion * share)
        return _split(estimate, completion - estimate, "estimated")
    return _split(
        -(-reasoning_chars // _CHARS_PER_TOKEN), -(-answer_chars // _CHARS_PER_TOKEN), "estimated"
    )


def _split(reasoning: int, answer: int | None, source: str) -> dict[str, Any]:
    return {
        "reasoning_tokens": reasoning,
        "answer_tokens": answer,
        "reasoning_token_source": source,
    }


def reasoning_metrics(response: ChatResponse) -> dict[str, Any]:
    """The keys every task record and speed trial carries about reasoning."""
    timing = response.timing
    first_answer = timing.first_content_ms if timing is not None else None
    return {
        **token_split(response),
        "ttft_answer_ms": None if first_answer is None else round(first_answer, 3),
        "truncated_in_reasoning": truncated_in_reasoning(response),
    }
