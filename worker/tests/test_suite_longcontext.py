"""longcontext: deterministic filler, decoys, one-code answers and context-overflow skips."""

from __future__ import annotations

import pytest

from worker.engine.errors import EngineError
from worker.engine.providers.base import ChatResponse
from worker.engine.suites import RunContext, available_suites
from worker.engine.suites.longcontext import build_context, verify

SUITE = available_suites()["longcontext"]
TASKS = {t["id"]: t for t in SUITE.effective_tasks()}


def score(task_id: str, text: str, finish: str = "stop") -> tuple[float, bool]:
    verdict = verify(TASKS[task_id], ChatResponse(content=text, finish_reason=finish))
    return verdict.score, verdict.passed


def test_four_tasks_with_growing_prompts():
    sizes = [
        len(TASKS[t]["messages"][1]["content"]) for t in ("lc-2k", "lc-8k", "lc-16k", "lc-32k")
    ]
    assert sizes == sorted(sizes)
    assert 7000 < sizes[0] < 9500
    assert 120_000 < sizes[3] < 135_000


def test_context_is_deterministic_and_holds_the_needle_once():
    first = build_context(2000, 0.5, "NEEDLE")
    assert first == build_context(2000, 0.5, "NEEDLE")
    assert first.count("NEEDLE") == 1
    prompt = TASKS["lc-8k"]["messages"][1]["content"]
    assert prompt.count("AU-9036-M") == 1
    assert "{{CONTEXT}}" not in prompt


def test_correct_code():
    assert score("lc-2k", "AU-4172-K") == (100.0, True)
    assert score("lc-2k", "The access code is au-4172-k.") == (100.0, True)


def test_wrong_code():
    assert score("lc-2k", "KS-2291-T") == (0.0, False)


def test_listing_several_candidate_codes_does_not_pass():
    assert score("lc-2k", "It is one of AU-4172-K, KS-2291-T or LM-8305-R.") == (0.0, False)


def test_partial_code_fails():
    assert score("lc-2k", "AU-4172") == (0.0, False)


def test_empty_and_unicode():
    assert score("lc-2k", "") == (0.0, False)
    assert score("lc-2k", "Code → «AU-4172-K» ✅") == (100.0, True)


def test_truncated_answer_cannot_pass():
    verdict = verify(TASKS["lc-2k"], ChatResponse(content="AU-4172-K", finish_reason="length"))
    assert verdict.passed is False
    assert verdict.details["evaluation_status"] == "truncated"


class _TooSmall:
    api = "openai"
    model = "fake"

    def chat_stream(self, request):
        raise EngineError("server said: the request exceeds the available context size")

    chat = chat_stream


def test_context_overflow_is_reported_as_skipped_with_the_reason():
    record = SUITE.run_task(TASKS["lc-32k"], RunContext(provider=_TooSmall()))
    assert record["metadata"]["skipped"] is True
    assert "context" in record["metadata"]["skip_reason"]
    assert record["execution_ok"] is True
    assert record["passed"] is False
    ran = {**record, "task_id": "lc-2k", "score": 100.0, "metadata": {}}
    assert SUITE.score([ran, record]) == 100.0


@pytest.mark.llm
def test_the_sizes_hold_in_a_real_tokenizer(llm_url):
    """ "About 2K tokens" in SmolLM2's own tokenizer, not only by the 4-characters rule."""
    import httpx

    for task_id, target in (("lc-2k", 2000), ("lc-8k", 8000)):
        prompt = TASKS[task_id]["messages"][1]["content"]
        tokens = httpx.post(f"{llm_url}/tokenize", json={"content": prompt}, timeout=60)
        count = len(tokens.json()["tokens"])
        assert 0.85 * target < count < 1.15 * target, (task_id, count)
