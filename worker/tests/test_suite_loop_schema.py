"""loop_schema verifier: JSON Schema validity plus expected values; scores written out."""

from __future__ import annotations

import json

from worker.engine.providers.base import ChatResponse
from worker.engine.suites import available_suites
from worker.engine.suites.loop_schema import lookup, verify

SUITE = available_suites()["loop_schema"]
TASKS = {t["id"]: t for t in SUITE.effective_tasks()}

ORDER = {
    "order_id": "ORD-1007",
    "lines": [
        {"sku": "PEN-BLUE", "quantity": 3, "unit_price": 1.2},
        {"sku": "PAD-A5", "quantity": 1, "unit_price": 4.5},
    ],
}


def score(task_id: str, text: str, finish: str = "stop") -> tuple[float, bool]:
    verdict = verify(TASKS[task_id], ChatResponse(content=text, finish_reason=finish))
    return verdict.score, verdict.passed


def test_suite_has_twelve_tasks():
    assert len(SUITE.tasks) == 12


def test_correct_answer_scores_100():
    assert score("ls-02", json.dumps(ORDER)) == (100.0, True)


def test_partial_values_on_a_valid_document():
    wrong = {**ORDER, "lines": [ORDER["lines"][0], {**ORDER["lines"][1], "sku": "PAD-A4"}]}
    # Schema valid (50) + 4 of 5 values (40).
    assert score("ls-02", json.dumps(wrong)) == (90.0, True)


def test_schema_invalid_json_loses_the_schema_half():
    bad = {**ORDER, "order_id": "1007"}  # breaks the pattern, and the value is wrong too
    assert score("ls-02", json.dumps(bad)) == (40.0, False)


def test_extra_property_is_schema_invalid():
    extra = {**ORDER, "note": "rush"}
    verdict = verify(TASKS["ls-02"], ChatResponse(content=json.dumps(extra), finish_reason="stop"))
    assert (verdict.score, verdict.passed) == (50.0, False)
    assert verdict.details["schema_valid"] is False


def test_malformed_json_scores_zero():
    assert score("ls-02", '{"order_id": "ORD-1007", "lines": [') == (0.0, False)


def test_empty_scores_zero():
    assert score("ls-02", "") == (0.0, False)


def test_null_is_required_where_expected():
    doc = {"ticket_id": "T-88", "reporter": "lena", "priority": "high", "assignee": None}
    assert score("ls-10", json.dumps(doc)) == (100.0, True)
    assert score("ls-10", json.dumps({**doc, "assignee": "sam"})) == (87.5, True)


def test_unicode_and_fenced_answer():
    doc = {
        "name": "Jonas Berg",
        "address": {
            "street": "Storgatan 5",
            "postal_code": "114 55",
            "city": "Stockholm",
            "country": "SE",
        },
    }
    text = "```json\n" + json.dumps(doc, ensure_ascii=False) + "\n```"
    assert score("ls-07", text) == (100.0, True)
    doc["address"]["city"] = "Göteborg"
    assert score("ls-07", json.dumps(doc, ensure_ascii=False)) == (90.0, True)


def test_lookup_paths():
    assert lookup(ORDER, "lines.1.sku") == "PAD-A5"
    assert lookup(ORDER, "lines.5.sku") is None
    assert lookup(ORDER, "missing.x") is None


def test_truncated_answer_cannot_pass():
    verdict = verify(
        TASKS["ls-02"], ChatResponse(content=json.dumps(ORDER), finish_reason="length")
    )
    assert verdict.passed is False
    assert verdict.details["evaluation_status"] == "truncated"
