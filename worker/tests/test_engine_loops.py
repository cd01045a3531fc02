"""Looping answers end early (issue 35): the tail detector, and a real server forced to loop."""

from __future__ import annotations

import pytest

from worker.engine.loops import MIN_CHARS, LoopWatch, repeats_needed, tail_loop
from worker.engine.providers import ChatRequest, OpenAIProvider
from worker.engine.providers.base import ChatResponse
from worker.engine.suites import RunContext, available_suites
from worker.engine.suites.common import finish
from worker.engine.transport import Transport

SENTENCE = "Let me check the sum again. "  # 28 characters
# SmolLM2 may write what it likes for a few words, then the grammar holds it to one sentence,
# over a thousand tokens, more than MAX_TOKENS allows: a loop only the detector can end.
LOOP_GRAMMAR = 'root ::= [A-Za-z ]{1,12} ". " ("Let me check the sum again. "){200}'
MAX_TOKENS = 600


def test_a_sentence_repeated_at_the_tail_is_a_loop():
    text = "The bakery sells muffins. " + SENTENCE * repeats_needed(len(SENTENCE))
    loop = tail_loop(text)
    assert loop is not None
    assert (loop.span, loop.text) == (len(SENTENCE), SENTENCE)
    assert loop.repeats == repeats_needed(len(SENTENCE))
    # More copies are counted, up to the start of the loop.
    assert tail_loop("Intro. " + SENTENCE * 20).repeats == 20


def test_a_short_period_is_found_as_its_shortest_span_of_eight_or_more():
    loop = tail_loop("x = " + "abc" * 200)
    assert loop is not None and loop.span == 9 and loop.text in ("abcabcabc", "bcabcabca")


def test_too_few_copies_or_a_broken_tail_is_no_loop():
    needed = repeats_needed(len(SENTENCE))
    assert tail_loop(SENTENCE * (needed - 1)) is None
    # The loop must reach the end: an answer that repeated, then moved on, is not looping now.
    assert tail_loop(SENTENCE * 30 + "So the change is $28.00.") is None
    assert tail_loop("") is None


def test_short_repeats_in_ordinary_answers_are_not_loops():
    table = "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * 3
    rule = "=" * 120
    zeros = "[" + "0, " * 40 + "0]"
    for text in (table, rule, "0, " * 60, zeros, "ha" * 100):
        assert len(text) < MIN_CHARS or tail_loop(text) is None, text
    # Four copies of a short span are not enough: they must cover MIN_CHARS.
    assert repeats_needed(8) * 8 >= MIN_CHARS and repeats_needed(200) == 4


def test_a_span_over_two_hundred_characters_is_not_looked_for():
    long = "".join(chr(65 + i % 26) + str(i) for i in range(80))[:230]
    assert len(long) == 230 and tail_loop(long * 6) is None


def test_the_watch_checks_every_sixteen_chunks_and_keeps_only_a_tail():
    watch = LoopWatch()
    pieces = ["Let ", "me ", "check ", "the ", "sum ", "again. "] * 40
    stopped = next(i for i, piece in enumerate(pieces, 1) if watch.feed(piece))
    assert stopped % 16 == 0 and stopped < len(pieces)
    assert watch.record() == {
        "span_chars": len(SENTENCE),
        "repeats": watch.loop.repeats,
        "stopped_at_chunk": stopped,
    }
    assert len(watch.tail) <= 800
    assert LoopWatch().record() is None


def test_a_loop_finish_cannot_pass_even_with_a_full_score():
    verdict = finish(100.0, ChatResponse(content="42 42 42", finish_reason="loop"), {})
    assert verdict.passed is False and verdict.score == 100.0
    assert verdict.details["evaluation_status"] == "loop"
    assert verdict.details["truncated"] is True
    assert finish(100.0, ChatResponse(content="42", finish_reason="stop"), {}).passed is True


class _GrammarProvider(OpenAIProvider):
    """The real provider, with a per-request GBNF grammar added to every body."""

    def _body(self, request: ChatRequest, *, stream: bool) -> dict:
        return {**super()._body(request, stream=stream), "grammar": LOOP_GRAMMAR}


@pytest.fixture
def looping_provider(llm_url, llm_model):
    provider = _GrammarProvider(Transport(llm_url, timeout=60), llm_model)
    yield provider
    provider.close()


@pytest.mark.llm
def test_a_real_looping_stream_is_stopped_far_before_max_tokens(
    looping_provider, llm_url, llm_model
):
    request = ChatRequest(
        messages=[{"role": "user", "content": "What is 17 + 25?"}],
        max_tokens=MAX_TOKENS,
        stop_loops=True,
    )
    response = looping_provider.chat_stream(request)
    assert response.finish_reason == "loop"
    assert response.loop is not None and response.loop["span_chars"] == len(SENTENCE)
    assert response.content.count(SENTENCE.strip()) >= repeats_needed(len(SENTENCE)) - 1
    # Stopped within a few checks of the loop's first detectable point, not at the limit.
    assert response.completion_tokens is not None
    assert response.completion_tokens < MAX_TOKENS / 3
    # The server has one slot and answers a stream's headers when the slot starts on it: had
    # it gone on generating the stopped answer (hundreds of tokens), this one would wait.
    plain = OpenAIProvider(Transport(llm_url, timeout=60), llm_model)
    try:
        after = plain.chat_stream(ChatRequest(messages=request.messages, max_tokens=4))
    finally:
        plain.close()
    assert after.timing is not None and after.timing.headers_ms is not None
    assert after.timing.headers_ms < 1500


@pytest.mark.llm
def test_a_quality_task_stopped_in_a_loop_scores_as_a_wrong_cut_off_answer(looping_provider):
    suite = available_suites()["reasonmath"]
    task = suite.effective_tasks()[0]
    task["config"] = {**task["config"], "max_tokens": MAX_TOKENS}
    record = suite.run_task(task, RunContext(provider=looping_provider))
    assert record["finish_reason"] == "loop"
    assert record["passed"] is False and record["error"] == ""
    assert record["metadata"]["verdict"]["evaluation_status"] == "loop"
    assert record["metadata"]["verdict"]["truncated"] is True
    assert record["metadata"]["loop"]["span_chars"] == len(SENTENCE)
    assert 0 < record["tokens_generated"] < MAX_TOKENS / 3
