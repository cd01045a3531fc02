"""toolcall verifier on hand-written model outputs; expected scores are written out."""

from __future__ import annotations

import json

import pytest

from worker.engine.providers.base import ChatResponse, ToolCall
from worker.engine.suites import available_suites
from worker.engine.suites.toolcall import verify

SUITE = available_suites()["toolcall"]
TASKS = {t["id"]: t for t in SUITE.effective_tasks()}


def call(tool: str, /, **args) -> ToolCall:
    return ToolCall(id="c1", name=tool, arguments=args, raw_arguments=json.dumps(args))


def reply(*calls: ToolCall, content: str = "", finish: str = "stop") -> ChatResponse:
    return ChatResponse(content=content, tool_calls=list(calls), finish_reason=finish)


def score(task_id: str, response: ChatResponse) -> tuple[float, bool]:
    verdict = verify(TASKS[task_id], response)
    return verdict.score, verdict.passed


def test_suite_has_fifteen_tasks_with_validated_expectations():
    assert len(SUITE.tasks) == 15
    assert SUITE.spec["validation_schema"] == "suite-toolcall-1.schema.json"


def test_correct_call():
    assert score("tc-01", reply(call("get_weather", city="Lisbon", unit="celsius"))) == (
        100.0,
        True,
    )


def test_string_argument_matches_as_casefolded_substring():
    assert score("tc-01", reply(call("get_weather", city="Lisbon, Portugal"))) == (100.0, True)


def test_numeric_argument_accepts_a_numeric_string():
    response = reply(call("convert_currency", amount="250", from_currency="EUR", to_currency="JPY"))
    assert score("tc-02", response) == (100.0, True)


def test_wrong_argument_value():
    response = reply(call("convert_currency", amount=205, from_currency="EUR", to_currency="JPY"))
    assert score("tc-02", response) == (0.0, False)


def test_wrong_tool():
    assert score("tc-05", reply(call("search_web", query="NVDA price"))) == (0.0, False)


def test_partial_two_requirements_one_met():
    response = reply(call("get_weather", city="Oslo"))
    assert score("tc-14", response) == (50.0, False)


def test_each_requirement_needs_its_own_matching_call():
    # Two calls with the right name but one wrong city: only Oslo is met.
    response = reply(call("get_weather", city="Oslo"), call("get_weather", city="Cairns"))
    assert score("tc-14", response) == (50.0, False)
    both = reply(call("get_weather", city="Oslo"), call("get_weather", city="Cairo"))
    assert score("tc-14", both) == (100.0, True)


def test_extra_undeclared_argument_earns_half():
    response = reply(call("set_timer", minutes=12, label="tea", priority="high"))
    assert score("tc-03", response) == (50.0, False)


def test_prose_instead_of_a_tool_call_earns_25():
    response = reply(content="It is probably sunny in Lisbon, around 20 °C.")
    verdict = verify(TASKS["tc-01"], response)
    assert (verdict.score, verdict.passed) == (25.0, False)
    assert verdict.details["reason"] == "prose instead of a tool call"


def test_empty_response_scores_zero():
    assert score("tc-01", reply()) == (0.0, False)
    assert score("tc-10", reply()) == (0.0, False)


def test_malformed_arguments_do_not_match():
    broken = ToolCall(id="c1", name="get_weather", arguments=None, raw_arguments='{"city": "Lis')
    assert score("tc-01", reply(broken)) == (0.0, False)


def test_hallucinated_tool_is_judged_against_the_tasks_allowed_tools():
    response = reply(call("get_weather", city="Lisbon"), call("book_flight", to="Lisbon"))
    verdict = verify(TASKS["tc-01"], response)
    assert (verdict.score, verdict.passed) == (50.0, False)
    assert verdict.details["hallucinated_tools"] == ["book_flight"]


def test_abstention_correct_and_wrong():
    assert score("tc-10", reply(content="Ottawa is the capital of Canada.")) == (100.0, True)
    assert score("tc-10", reply(call("search_web", query="capital of Canada"))) == (0.0, False)


def test_unicode_arguments():
    response = reply(
        call(
            "translate_text",
            text="Où est la gare? – Where is the nearest train station?",
            target_language="Deutsch/German",
        )
    )
    assert score("tc-04", response) == (100.0, True)
    assert score(
        "tc-09",
        reply(call("create_event", title="Design Review ✏️", date="2026-03-14", time="15:00")),
    ) == (100.0, True)


def test_required_any_alternative():
    assert score("tc-13", reply(call("search_web", query="Artemis programme news"))) == (
        100.0,
        True,
    )


def test_truncated_response_is_recorded_and_cannot_pass():
    verdict = verify(TASKS["tc-01"], reply(call("get_weather", city="Lisbon"), finish="length"))
    assert verdict.score == 100.0
    assert verdict.passed is False
    assert verdict.details["truncated"] is True
    assert verdict.details["evaluation_status"] == "truncated"


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_every_task_has_a_reachable_full_score(task_id):
    # The expectations are data: build the perfect answer from them and check it scores 100.
    rules = TASKS[task_id]["validation"]
    if rules.get("forbid_tools"):
        response = reply(content="Plain answer.")
    else:
        wanted = rules.get("required") or rules["required_any"][:1]
        response = reply(*(call(r["name"], **r.get("args", {})) for r in wanted))
    assert verify(TASKS[task_id], response).score == 100.0
