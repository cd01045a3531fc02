"""instructfollow verifier on hand-written answers; expected scores are written out."""

from __future__ import annotations

from worker.engine.providers.base import ChatResponse
from worker.engine.suites import available_suites
from worker.engine.suites.instructfollow import verify

SUITE = available_suites()["instructfollow"]
TASKS = {t["id"]: t for t in SUITE.effective_tasks()}


def score(task_id: str, text: str, finish: str = "stop") -> tuple[float, bool]:
    verdict = verify(TASKS[task_id], ChatResponse(content=text, finish_reason=finish))
    return verdict.score, verdict.passed


def test_suite_has_fifteen_tasks():
    assert len(SUITE.tasks) == 15


def test_correct_numbered_list():
    text = "1. Banana\n2. Lemon\n3. Pineapple\n4. Mango\n5. Starfruit"
    assert score("if-01", text) == (100.0, True)


def test_partial_list_with_an_intro_line():
    text = "Here you go:\n1. Banana\n2. Lemon\n3. Pineapple\n4. Mango\n5. Starfruit"
    assert score("if-01", text) == (50.0, False)


def test_wrong_count():
    assert score("if-01", "1. Banana\n2. Lemon\n3. Mango") == (0.0, False)


def test_empty():
    assert score("if-01", "") == (0.0, False)


def test_banned_word_is_matched_as_a_word_not_a_substring():
    ok = "It stands on a cliff. Its lamp turns all night. Ships see it in every season."
    assert score("if-02", ok) == (100.0, True)
    bad = "It stands by the sea. Its lamp turns all night. Ships see it."
    assert score("if-02", bad) == (50.0, False)


def test_one_of_and_exact_text():
    assert score("if-04", "NO") == (100.0, True)
    assert score("if-04", "No, penguins cannot fly.") == (0.0, False)
    assert score("if-11", "Configuration saved.") == (100.0, True)
    assert score("if-11", "Configuration saved!") == (0.0, False)
    assert score("if-12", "alpha-7 ready\nbravo-9 standing by\n") == (100.0, True)


def test_malformed_json_fails_the_json_rule():
    assert score("if-07", '{"city": "Lisbon", "country": "Portugal", "population": 545000}') == (
        100.0,
        True,
    )
    assert score("if-07", '```json\n{"city": "Lisbon"}\n```') == (0.0, False)
    assert score("if-07", '{"city": "Lisbon", "country": "Portugal", "population": ') == (
        0.0,
        False,
    )


def test_extra_key_fails_exact_keys():
    text = '{"city": "Lisbon", "country": "Portugal", "population": 1, "mayor": "x"}'
    assert score("if-07", text) == (0.0, False)


def test_unicode_lowercase_slogan():
    assert score("if-03", "ring it, ça sonne — bikes rule") == (100.0, True)
    assert score("if-03", "Ring It Loud") == (50.0, False)


def test_ordered_phrases_and_ending():
    good = "I grabbed my umbrella, jumped over a puddle and heard the thunder roar!"
    assert score("if-14", good) == (100.0, True)
    wrong_order = "Thunder rolled as my umbrella dripped into a puddle!"
    assert score("if-14", wrong_order) == (66.67, False)


def test_every_line_ends_with_ignores_punctuation():
    poem = (
        "The cat walks out at night,\nHer eyes glow through the night;\n"
        "She hunts the quiet night.\nAnd sleeps by dawn's last night"
    )
    assert score("if-09", poem) == (100.0, True)


def test_title_then_list():
    text = "WEEKEND TRIP\n1. Socks\n2. Charger\n3. Toothbrush\n4. Rain jacket"
    assert score("if-15", text) == (100.0, True)


def test_truncated_answer_is_recorded_and_cannot_pass():
    verdict = verify(
        TASKS["if-11"], ChatResponse(content="Configuration saved.", finish_reason="length")
    )
    assert verdict.passed is False
    assert verdict.details["evaluation_status"] == "truncated"


def test_every_rule_names_a_known_check():
    from worker.engine.suites.instructfollow import CHECKS

    for task in TASKS.values():
        for rule in task["validation"]["rules"]:
            assert rule["check"] in CHECKS
