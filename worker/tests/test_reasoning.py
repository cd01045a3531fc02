"""Reasoning models, piece by piece: the reasoning/answer split of a stream (tags split across
events, reasoning fields beside inline tags), the token counts and their source, truncation
inside the thinking, the output limits and the manifest they feed.

The end-to-end run on a real llama.cpp server that thinks first is test_reasoning_e2e.py.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from worker.cli import main
from worker.engine.plan import RunConfig
from worker.engine.preflight import output_limits
from worker.engine.providers.base import ChatResponse, OutputSplit
from worker.engine.providers.openai_compat import _Stream
from worker.engine.reasoning import token_split, truncated_in_reasoning
from worker.engine.suites import available_suites
from worker.engine.suites.common import finish
from worker.rules.comparability import reasons_for_bundle
from worker.rules.reasoning import (
    DEFAULT_THINKING_BUDGET,
    MAX_TOKENS_CEILING,
    OutputLimits,
    chosen_budget,
)
from worker.rules.timings import StreamTiming


def _split(*pieces: str | tuple[str, str]) -> OutputSplit:
    """Feed events: a str is answer-side text, ("r", text) a reasoning field."""
    split = OutputSplit()
    for piece in pieces:
        if isinstance(piece, tuple):
            split.take(reasoning=piece[1])
        else:
            split.take(text=piece)
    return split


def test_tags_split_across_events_are_reasoning_and_counted_one_event_each():
    split = _split("<th", "ink>", "Let me ", "think</", "think>", "\n\n", "42", ".")
    timing = StreamTiming()
    content, reasoning = split.finish(timing)
    assert (content, reasoning) == ("42.", "Let me think")
    # Both opening pieces were undecided until "ink>" closed the tag; the "</", "think>" pieces
    # were inside the thinking.
    assert (timing.reasoning_events, timing.answer_events) == (5, 3)
    assert split.ended_in_reasoning is False


def test_a_held_back_lt_sign_that_was_no_tag_is_answer():
    split = _split("<", "5 is less than 6")
    timing = StreamTiming()
    assert split.finish(timing) == ("<5 is less than 6", "")
    assert (timing.reasoning_events, timing.answer_events) == (0, 2)


def test_a_trailing_partial_tag_is_counted_on_the_side_it_was_on():
    split = _split("<think>", "working", "</thi")
    timing = StreamTiming()
    content, reasoning = split.finish(timing)
    assert content == "" and reasoning == "working</thi"
    assert (timing.reasoning_events, timing.answer_events) == (3, 0)
    assert split.ended_in_reasoning is True


def test_reasoning_fields_and_inline_tags_are_both_reasoning():
    split = _split(("r", "first I add"), ("r", " the numbers"), "<think>then check</think>", "7")
    timing = StreamTiming()
    assert split.finish(timing) == ("7", "first I add the numbers\nthen check")
    assert (timing.reasoning_events, timing.answer_events) == (3, 1)


def test_an_event_that_ends_the_thinking_and_starts_the_answer_counts_on_both_sides():
    split = _split("<think>", "hmm", "</think>The answer")
    timing = StreamTiming()
    assert split.finish(timing) == ("The answer", "hmm")
    assert (timing.reasoning_events, timing.answer_events) == (3, 1)


def test_whitespace_after_the_thinking_is_not_the_first_answer_token():
    stream = _Stream(None)
    events = [
        {"choices": [{"delta": {"role": "assistant"}}]},
        {"choices": [{"delta": {"reasoning_content": "Think"}}]},
        {"choices": [{"delta": {"reasoning_content": "ing."}}]},
        {"choices": [{"delta": {"content": "\n\n"}}]},
        {"choices": [{"delta": {"content": "ANSWER"}}]},
        {"choices": [{"delta": {"content": ": 4"}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5}},
    ]
    for index, event in enumerate(events):
        stream.take(event, now=index / 1000)  # event i arrives at i ms
    response = stream.response()
    assert response.content == "ANSWER: 4" and response.reasoning == "Thinking."
    assert response.timing.first_token_ms == 1.0
    assert response.timing.first_content_ms == 4.0
    assert token_split(response) == {
        "reasoning_tokens": 2,
        "answer_tokens": 3,
        "reasoning_token_source": "stream",
    }


def _response(**fields) -> ChatResponse:
    return ChatResponse(**fields)


def test_the_servers_reasoning_count_wins_unless_it_says_zero_against_the_stream():
    timing = StreamTiming(token_chunk_ms=[1.0, 2.0, 3.0], reasoning_events=2, answer_events=1)
    server = _response(completion_tokens=30, reasoning_tokens=20, timing=timing, reasoning="x")
    assert token_split(server) == {
        "reasoning_tokens": 20,
        "answer_tokens": 10,
        "reasoning_token_source": "server",
    }
    zero = _response(completion_tokens=3, reasoning_tokens=0, timing=timing, reasoning="x")
    assert token_split(zero)["reasoning_token_source"] == "stream"


def test_a_non_streamed_answer_shares_the_count_by_characters():
    response = _response(completion_tokens=40, reasoning="r" * 300, content="a" * 100)
    assert token_split(response) == {
        "reasoning_tokens": 30,
        "answer_tokens": 10,
        "reasoning_token_source": "estimated",
    }
    bare = _response(reasoning="r" * 9, content="abcd")
    assert token_split(bare)["reasoning_tokens"] == 3  # ceil(9 / 4)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"finish_reason": "length", "ended_in_reasoning": True}, True),
        ({"finish_reason": "length", "reasoning": "thinking", "content": " \n"}, True),
        ({"finish_reason": "length", "reasoning": "done", "content": "The ans"}, False),
        ({"finish_reason": "stop", "ended_in_reasoning": True}, False),
        ({"finish_reason": "length", "content": "plain answer cut"}, False),
    ],
)
def test_truncation_inside_the_thinking_is_told_apart(fields, expected):
    assert truncated_in_reasoning(_response(**fields)) is expected


def test_the_verdict_of_a_task_cut_off_while_thinking_says_so_with_a_hint():
    cut = finish(0.0, _response(finish_reason="length", ended_in_reasoning=True), {})
    assert cut.passed is False
    assert cut.details["evaluation_status"] == "truncated_in_reasoning"
    assert cut.details["truncated_in_reasoning"] is True
    assert "--thinking-budget" in cut.details["hint"]
    after = finish(100.0, _response(finish_reason="length", reasoning="r", content="ANSWER: 4"), {})
    assert after.details["evaluation_status"] == "truncated" and after.passed is False
    assert "truncated_in_reasoning" not in after.details


def test_limits_add_the_budget_and_max_tokens_raises_or_lowers_the_answer_cap():
    config = {"max_tokens": 320, "temperature": 0.0}
    assert OutputLimits().apply(config) is config  # today's tasks, unchanged
    assert OutputLimits(thinking_budget=1000).apply(config) == {
        "max_tokens": 1320,
        "temperature": 0.0,
        "answer_max_tokens": 320,
        "thinking_budget": 1000,
    }
    assert OutputLimits(max_tokens=4000).apply(config)["max_tokens"] == 4000
    assert OutputLimits(max_tokens=16).apply(config)["max_tokens"] == 16
    assert OutputLimits(max_tokens=30000, thinking_budget=30000).apply(config)["max_tokens"] == (
        MAX_TOKENS_CEILING
    )
    small = OutputLimits(thinking_budget=8000, context_length=4096)
    assert small.apply(config)["max_tokens"] == 4096
    # Speed's lengths are what it measures: only lowered, never budgeted.
    assert OutputLimits(max_tokens=4000, thinking_budget=99).apply(config, thinks=False) is config
    assert OutputLimits(max_tokens=8).apply(config, thinks=False)["max_tokens"] == 8


def _digest(tasks: list[dict]) -> str:
    return hashlib.sha256(json.dumps(tasks, sort_keys=True).encode()).hexdigest()


def test_default_limits_leave_every_suites_tasks_and_so_the_manifest_as_they_were():
    for suite in available_suites().values():
        assert _digest(suite.effective_tasks(OutputLimits())) == _digest(suite.effective_tasks())
    reasonmath = available_suites()["reasonmath"]
    budgeted = reasonmath.effective_tasks(OutputLimits(thinking_budget=512))
    assert {t["config"]["max_tokens"] for t in budgeted} == {320 + 512}
    speed = available_suites()["speed"].effective_tasks(OutputLimits(thinking_budget=512))
    assert _digest(speed) == _digest(available_suites()["speed"].effective_tasks())


@pytest.mark.parametrize(
    ("options", "reasons", "expected"),
    [
        ({}, False, (0, "none")),
        ({}, True, (DEFAULT_THINKING_BUDGET, "detected")),
        ({"thinking_budget": 0}, True, (0, "option")),
        ({"thinking_budget": 300}, False, (300, "option")),
        # --max-tokens alone is the whole limit: no automatic budget on top.
        ({"max_tokens": 900}, True, (0, "none")),
    ],
)
def test_the_thinking_budget_is_the_options_else_automatic(options, reasons, expected):
    limits, source = output_limits(RunConfig(url="http://x", **options), reasons=reasons)
    assert (limits.thinking_budget, source) == expected


def test_only_a_budget_other_than_the_automatic_one_makes_a_run_non_comparable():
    settings = {"thinking_budget_source": "option", "reasoning_detected": True}
    assert chosen_budget({**settings, "thinking_budget": DEFAULT_THINKING_BUDGET}) is None
    assert chosen_budget({**settings, "thinking_budget": 0}) == 0
    assert chosen_budget({"thinking_budget": 2048, "thinking_budget_source": "detected"}) is None
    assert chosen_budget({"thinking_budget": "2048", "thinking_budget_source": "option"}) is None
    bundle = {
        "status": "complete",
        "settings": {"thinking_budget": 64, "thinking_budget_source": "option"},
        "suites": {"reasonmath": {"tasks": [{"task_id": "rm-01", "metadata": {}}]}},
    }
    assert reasons_for_bundle(bundle) == ["--thinking-budget 64 sets the thinking allowed"]


@pytest.mark.parametrize(
    "flags",
    [["--max-tokens", "0"], ["--max-tokens", "40000"], ["--thinking-budget", "-1"]],
)
def test_limits_out_of_range_are_refused_before_any_request(flags, bench_home, capsys):
    # Port 9 (discard) has no server: the refusal comes before any connection is tried.
    assert main(["run", "--url", "http://127.0.0.1:9", *flags]) == 2
    assert "must be between" in capsys.readouterr().err


def test_ollamas_thinking_field_and_inline_tags_are_counted_the_same_way():
    from worker.engine.providers.ollama import _State

    state = _State()
    lines = [
        {"message": {"thinking": "Nine "}},
        {"message": {"thinking": "marbles."}},
        {"message": {"content": "<think>"}},
        {"message": {"content": "again"}},
        {"message": {"content": "</think>"}},
        {"message": {"content": "ANSWER: 9"}},
        {"done": True, "done_reason": "stop", "eval_count": 6, "prompt_eval_count": 20},
    ]
    for line in lines:
        state.add(line)
    timing = StreamTiming(token_chunk_ms=[1.0] * 6)
    response = ChatResponse(timing=timing)
    state.apply(response, timing)
    assert (response.content, response.reasoning) == ("ANSWER: 9", "Nine marbles.\nagain")
    assert token_split(response) == {
        "reasoning_tokens": 5,
        "answer_tokens": 1,
        "reasoning_token_source": "stream",
    }
    assert response.ended_in_reasoning is False
