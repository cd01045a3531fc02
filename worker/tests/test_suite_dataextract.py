"""dataextract verifier on hand-written answers; expected scores are written out."""

from __future__ import annotations

import json

import pytest

from worker.engine.providers.base import ChatResponse
from worker.engine.suites import available_suites
from worker.engine.suites.dataextract import verify

SUITE = available_suites()["dataextract"]
TASKS = {t["id"]: t for t in SUITE.effective_tasks()}


def score(task_id: str, text: str, finish: str = "stop") -> tuple[float, bool]:
    verdict = verify(TASKS[task_id], ChatResponse(content=text, finish_reason=finish))
    return verdict.score, verdict.passed


def test_suite_has_fifteen_tasks():
    assert len(SUITE.tasks) == 15


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_expected_value_itself_scores_100(task_id):
    expected = TASKS[task_id]["validation"]["expected"]
    assert score(task_id, json.dumps(expected, ensure_ascii=False)) == (100.0, True)


def test_correct_in_a_fence_with_prose_around_it():
    text = 'Sure:\n```json\n{"order_id": "7781", "delivery_date": "2026-05-06"}\n```\nLet me know!'
    assert score("de-08", text) == (100.0, True)


def test_wrong_value_costs_its_atom():
    # The old date instead of the moved one: 1 of 2 atoms.
    assert score("de-08", '{"order_id": "7781", "delivery_date": "2026-05-04"}') == (50.0, False)


def test_partial_list_of_objects_by_anchor():
    answer = {
        "people": [
            {"name": "Mei Lin", "role": "facilitator", "email": "mei@orbit.example"},
            {"name": "Rafael Costa", "role": "notes", "email": "wrong@orbit.example"},
        ]
    }
    # 9 atoms: Mei 3 + Rafael 2 (email wrong) + Oksana 0 → 5/9.
    assert score("de-07", json.dumps(answer)) == (55.56, False)


def test_empty_answer():
    assert score("de-01", "") == (0.0, False)


def test_malformed_json():
    assert score("de-08", '{"order_id": "7781", "delivery_date": ') == (0.0, False)


def test_numbers_need_numbers_and_booleans_need_booleans():
    answer = {
        "job_title": "Backend Engineer (Go)",
        "city": "Rotterdam",
        "fully_remote": "false",
        "salary_min": "58000",
        "salary_max": 71000,
        "currency": "EUR",
    }
    # fully_remote and salary_min are strings: 4 of 6.
    assert score("de-03", json.dumps(answer)) == (66.67, False)


def test_missing_key_counts_as_null():
    assert score("de-10", '{"email": "help@quillpad.example", "city": "Cork"}') == (100.0, True)
    # A decoy phone number where none exists costs the atom.
    text = '{"email": "help@quillpad.example", "phone": "+353 21 000", "city": "Cork"}'
    assert score("de-10", text) == (66.67, False)


def test_extra_keys_are_noted_not_penalised():
    verdict = verify(
        TASKS["de-08"],
        ChatResponse(
            content='{"order_id": "7781", "delivery_date": "2026-05-06", "note": "x"}',
            finish_reason="stop",
        ),
    )
    assert verdict.score == 100.0
    assert verdict.details["extra_keys"] == ["note"]


def test_wrong_shape_scores_zero():
    assert score("de-08", '["7781", "2026-05-06"]') == (0.0, False)


def test_unicode_values():
    answer = {
        "name": "Tomás Ortega",
        "title": "senior buyer",
        "company": "Lindqvist Tools AB",
        "phone": "+46 70 555 01 23",
        "email": "t.ortega@lindqvist.example",
    }
    assert score("de-01", json.dumps(answer, ensure_ascii=False)) == (100.0, True)
    answer["name"] = "Tomas Ortega"  # the accent matters
    assert score("de-01", json.dumps(answer)) == (80.0, False)


def test_scalar_list_is_one_multiset_atom():
    assert score("de-11", '{"allergies": ["latex"], "regular_medication": []}') == (100.0, True)
    text = '{"allergies": ["latex", "penicillin"], "regular_medication": []}'
    assert score("de-11", text) == (50.0, False)


def test_truncated_answer_is_recorded_and_cannot_pass():
    verdict = verify(
        TASKS["de-08"],
        ChatResponse(
            content='{"order_id": "7781", "delivery_date": "2026-05-06"}', finish_reason="length"
        ),
    )
    assert verdict.passed is False
    assert verdict.details["evaluation_status"] == "truncated"
