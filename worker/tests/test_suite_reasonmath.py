"""reasonmath verifier on hand-written model outputs; expected scores are written out."""

from __future__ import annotations

from worker.engine.providers.base import ChatResponse
from worker.engine.suites import available_suites
from worker.engine.suites.reasonmath import verify

SUITE = available_suites()["reasonmath"]
TASKS = {t["id"]: t for t in SUITE.effective_tasks()}


def score(task_id: str, text: str, finish: str = "stop") -> tuple[float, bool]:
    verdict = verify(TASKS[task_id], ChatResponse(content=text, finish_reason=finish))
    return verdict.score, verdict.passed


def test_suite_has_fifteen_tasks():
    assert len(SUITE.tasks) == 15


def test_correct_money_answer_with_working():
    text = "8 × 2.75 = 22.00\n50 − 22 = 28\nANSWER: $28.00"
    assert score("rm-01", text) == (100.0, True)


def test_wrong_number():
    assert score("rm-01", "ANSWER: $22.00") == (0.0, False)


def test_tolerance_edges():
    assert score("rm-01", "ANSWER: 28.02") == (100.0, True)
    assert score("rm-01", "ANSWER: 28.03") == (0.0, False)


def test_thousands_separator_and_bold_markdown():
    assert score("rm-09", "**ANSWER:** $2,121.80") == (100.0, True)


def test_missing_prefix_uses_last_line_and_notes_it():
    verdict = verify(TASKS["rm-02"], ChatResponse(content="From 09:40 to 13:05.\n205 minutes"))
    assert (verdict.score, verdict.passed) == (100.0, True)
    assert verdict.details["answer_prefix"] is False


def test_several_candidate_numbers_do_not_pass():
    assert score("rm-03", "ANSWER: 750 or maybe 700") == (0.0, False)


def test_partial_pairs():
    assert score("rm-07", "ANSWER: ana=48; ben=24; cleo=30") == (66.67, False)
    assert score("rm-07", "ANSWER: ana=$48; ben=$24; cleo=$24") == (100.0, True)


def test_pairs_with_commas_and_spaces():
    assert score("rm-12", "ANSWER: width = 9, length = 14") == (100.0, True)


def test_text_answer_and_hedge():
    assert score("rm-08", "ANSWER: Teo") == (100.0, True)
    assert score("rm-08", "ANSWER: Teo or Sol") == (0.0, False)
    assert score("rm-11", "ANSWER: Thursday") == (0.0, False)


def test_empty_response():
    assert score("rm-05", "") == (0.0, False)
    assert score("rm-05", "   \n  ") == (0.0, False)


def test_malformed_answer_line_without_a_number():
    assert score("rm-05", "ANSWER: fourteen-ish") == (0.0, False)


def test_unicode_in_the_answer():
    assert score("rm-10", "6,5 L × 3,4 → ANSWER: 22.1 ℓ") == (100.0, True)
    assert score("rm-11", "ANSWER: Friday 🙂") == (100.0, True)


def test_negative_and_decimal_without_leading_zero():
    assert score("rm-13", "ANSWER: .25") == (100.0, True)


def test_truncated_answer_is_recorded_and_cannot_pass():
    verdict = verify(TASKS["rm-05"], ChatResponse(content="ANSWER: 14", finish_reason="length"))
    assert verdict.passed is False
    assert verdict.details["evaluation_status"] == "truncated"
    assert verdict.details["finish_reason"] == "length"
