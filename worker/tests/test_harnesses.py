"""Harnesses: prompts they send and robust parsing of what models send back."""

from __future__ import annotations

import pytest

from worker.engine.harnesses import HARNESSES, parse, prepare
from worker.engine.providers.base import ChatRequest, ChatResponse, ToolCall

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
REQUEST = ChatRequest(
    messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}],
    tools=TOOLS,
)


def read(harness: str, text: str, **kw) -> tuple[ChatResponse, int]:
    parsed = parse(harness, ChatResponse(content=text, **kw))
    return parsed.response, parsed.malformed


def test_four_harnesses():
    assert HARNESSES == ("raw", "hermes", "qwen", "pi")
    with pytest.raises(ValueError):
        prepare("aider", REQUEST)


def test_raw_sends_native_tools_unchanged():
    assert prepare("raw", REQUEST) is REQUEST


@pytest.mark.parametrize(
    ("harness", "tag"), [("hermes", "<tool_call>"), ("qwen", "<function_call>")]
)
def test_tag_harnesses_move_tools_into_the_system_prompt(harness, tag):
    sent = prepare(harness, REQUEST)
    assert sent.tools is None
    assert tag in sent.messages[0]["content"] and "get_weather" in sent.messages[0]["content"]
    assert sent.messages[1] == {"role": "system", "content": "Be brief."}


def test_pi_asks_for_think_even_without_tools():
    sent = prepare("pi", ChatRequest(messages=[{"role": "user", "content": "2+2?"}]))
    assert "<think>" in sent.messages[0]["content"]


def test_hermes_parses_a_call_and_strips_it_from_content():
    resp, bad = read(
        "hermes",
        'Sure.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>',
    )
    assert [(c.name, c.arguments) for c in resp.tool_calls] == [("get_weather", {"city": "Oslo"})]
    assert resp.content == "Sure."
    assert bad == 0


def test_alternative_keys_and_string_arguments():
    text = (
        '<tool_call>{"function": "get_weather", '
        '"parameters": "{\\"city\\": \\"Lima\\"}"}</tool_call>'
    )
    resp, _ = read("hermes", text)
    assert resp.tool_calls[0].arguments == {"city": "Lima"}
    nested = (
        '<function_call>{"function": {"name": "get_weather", '
        '"args": {"city": "Rome"}}}</function_call>'
    )
    resp, _ = read("qwen", nested)
    assert resp.tool_calls[0].arguments == {"city": "Rome"}


def test_unclosed_final_tag_is_still_read():
    resp, bad = read("hermes", '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}')
    assert resp.tool_calls[0].name == "get_weather"
    assert bad == 0


def test_malformed_json_is_dropped_and_counted_not_guessed():
    resp, bad = read(
        "hermes", '<tool_call>{"name": "get_weather", "arguments": {"city": </tool_call>done'
    )
    assert resp.tool_calls == []
    assert bad == 1
    assert resp.content == "done"


def test_two_calls_one_broken():
    text = (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
        "<tool_call>not json</tool_call>"
        '<tool_call>```json\n{"name": "get_weather", '
        '"arguments": {"city": "Lima"}}\n```</tool_call>'
    )
    resp, bad = read("hermes", text)
    assert [c.arguments["city"] for c in resp.tool_calls] == ["Oslo", "Lima"]
    assert bad == 1


def test_prose_without_tags_is_left_alone():
    resp, bad = read("qwen", "I think it is sunny in Oslo.")
    assert resp.tool_calls == [] and bad == 0
    assert resp.content == "I think it is sunny in Oslo."


def test_native_calls_are_preserved():
    native = ToolCall(id="n1", name="get_weather", arguments={"city": "Kyiv"}, raw_arguments="{}")
    resp, _ = read("hermes", "ok", tool_calls=[native])
    assert resp.tool_calls == [native]


def test_pi_strips_reasoning_then_reads_calls():
    text = (
        "<think>Need weather → call tool.</think>\n"
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Zürich"}}</tool_call>'
    )
    parsed = parse("pi", ChatResponse(content=text))
    assert parsed.response.tool_calls[0].arguments == {"city": "Zürich"}
    assert parsed.reasoning_blocks == 1
    assert "Need weather" in parsed.response.reasoning
    assert parsed.response.content == ""


def test_pi_unclosed_think_leaves_no_answer():
    parsed = parse(
        "pi", ChatResponse(content="<think>still thinking about 42", finish_reason="length")
    )
    assert parsed.response.content == ""
    assert "42" in parsed.response.reasoning


def test_pi_missing_open_think_tag():
    parsed = parse("pi", ChatResponse(content="reasoning here</think>ANSWER: 7"))
    assert parsed.response.content == "ANSWER: 7"


def test_empty_response():
    for harness in HARNESSES:
        parsed = parse(harness, ChatResponse(content=""))
        assert parsed.response.content == "" and parsed.response.tool_calls == []
