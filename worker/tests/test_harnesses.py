"""Harnesses: prompts they send and robust parsing of what models send back."""

from __future__ import annotations

import pytest

from worker.engine.harnesses import parse, prepare
from worker.engine.matrix.adapters import variants
from worker.engine.matrix.programs import PROGRAMS
from worker.engine.providers.base import ChatRequest, ChatResponse, ToolCall
from worker.rules.harnesses import FORMATS, HARNESSES, PROGRAM_NAMES, program_variants

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
    assert HARNESSES[:4] == ("raw", "xml-tool-call", "xml-function-call", "think-xml-tool-call")
    with pytest.raises(ValueError):
        prepare("aider", REQUEST)


def test_the_rules_name_the_programs_and_variants_the_matrix_runs():
    """The site knows the programs and their variants from worker.rules alone; the matrix's
    pins and adapters are the same set."""
    assert tuple(PROGRAMS) == PROGRAM_NAMES
    for name in HARNESSES:
        assert tuple(variants(name)) == program_variants(name)


def test_raw_sends_native_tools_unchanged():
    assert prepare("raw", REQUEST) is REQUEST


@pytest.mark.parametrize(
    ("harness", "tag"), [("xml-tool-call", "<tool_call>"), ("xml-function-call", "<function_call>")]
)
def test_tag_harnesses_move_tools_into_the_system_prompt(harness, tag):
    sent = prepare(harness, REQUEST)
    assert sent.tools is None
    assert tag in sent.messages[0]["content"] and "get_weather" in sent.messages[0]["content"]
    assert sent.messages[1] == {"role": "system", "content": "Be brief."}


def test_think_format_asks_for_think_even_without_tools():
    sent = prepare(
        "think-xml-tool-call", ChatRequest(messages=[{"role": "user", "content": "2+2?"}])
    )
    assert "<think>" in sent.messages[0]["content"]


def test_xml_tool_call_parses_a_call_and_strips_it_from_content():
    resp, bad = read(
        "xml-tool-call",
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
    resp, _ = read("xml-tool-call", text)
    assert resp.tool_calls[0].arguments == {"city": "Lima"}
    nested = (
        '<function_call>{"function": {"name": "get_weather", '
        '"args": {"city": "Rome"}}}</function_call>'
    )
    resp, _ = read("xml-function-call", nested)
    assert resp.tool_calls[0].arguments == {"city": "Rome"}


def test_unclosed_final_tag_is_still_read():
    resp, bad = read(
        "xml-tool-call", '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    )
    assert resp.tool_calls[0].name == "get_weather"
    assert bad == 0


def test_malformed_json_is_dropped_and_counted_not_guessed():
    resp, bad = read(
        "xml-tool-call", '<tool_call>{"name": "get_weather", "arguments": {"city": </tool_call>done'
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
    resp, bad = read("xml-tool-call", text)
    assert [c.arguments["city"] for c in resp.tool_calls] == ["Oslo", "Lima"]
    assert bad == 1


def test_prose_without_tags_is_left_alone():
    resp, bad = read("xml-function-call", "I think it is sunny in Oslo.")
    assert resp.tool_calls == [] and bad == 0
    assert resp.content == "I think it is sunny in Oslo."


def test_native_calls_are_preserved():
    native = ToolCall(id="n1", name="get_weather", arguments={"city": "Kyiv"}, raw_arguments="{}")
    resp, _ = read("xml-tool-call", "ok", tool_calls=[native])
    assert resp.tool_calls == [native]


def test_think_format_strips_reasoning_then_reads_calls():
    text = (
        "<think>Need weather → call tool.</think>\n"
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Zürich"}}</tool_call>'
    )
    parsed = parse("think-xml-tool-call", ChatResponse(content=text))
    assert parsed.response.tool_calls[0].arguments == {"city": "Zürich"}
    assert parsed.reasoning_blocks == 1
    assert "Need weather" in parsed.response.reasoning
    assert parsed.response.content == ""


def test_think_format_unclosed_think_leaves_no_answer():
    parsed = parse(
        "think-xml-tool-call",
        ChatResponse(content="<think>still thinking about 42", finish_reason="length"),
    )
    assert parsed.response.content == ""
    assert "42" in parsed.response.reasoning


def test_think_format_missing_open_think_tag():
    parsed = parse("think-xml-tool-call", ChatResponse(content="reasoning here</think>ANSWER: 7"))
    assert parsed.response.content == "ANSWER: 7"


def test_empty_response():
    for harness in FORMATS:
        parsed = parse(harness, ChatResponse(content=""))
        assert parsed.response.content == "" and parsed.response.tool_calls == []


def test_a_native_tool_transcript_is_rewritten_in_the_harness_tags():
    request = ChatRequest(
        messages=[
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_0",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_0", "content": '{"temp_c": 4}'},
        ],
        tools=TOOLS,
    )
    sent = prepare("xml-function-call", request)
    assert sent.tools is None
    assert sent.messages[1] == {"role": "user", "content": "Weather in Oslo?"}
    assert sent.messages[2] == {
        "role": "assistant",
        "content": '<function_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}'
        "</function_call>",
    }
    assert sent.messages[3] == {
        "role": "user",
        "content": '<tool_response>{"temp_c": 4}</tool_response>',
    }


def test_an_unknown_harness_is_a_usage_error_before_any_request():
    from worker.engine.errors import UsageError
    from worker.engine.orchestrator import prepare_run
    from worker.engine.plan import RunConfig

    # Port 9 (discard) is never contacted: the harness is checked first.
    with pytest.raises(UsageError, match="unknown harness 'cursor'"):
        prepare_run(RunConfig(url="http://127.0.0.1:9", harness="cursor", suites=["toolcall"]))
    # A real harness program runs the matrix suites only.
    with pytest.raises(UsageError, match="aider harness runs the matrix suites only"):
        prepare_run(RunConfig(url="http://127.0.0.1:9", harness="aider", suites=["toolcall"]))
    with pytest.raises(UsageError, match="no variant 'vim'"):
        prepare_run(
            RunConfig(
                url="http://127.0.0.1:9",
                harness="mini-swe-agent",
                harness_variant="vim",
                suites=["matrix_bugfix"],
            )
        )


@pytest.mark.llm
def test_a_run_with_a_harness_against_the_real_server(llm_url, bench_home):
    """The harness is chosen per run, reaches the bundle and leaves speed untouched."""
    from worker.engine.bundle import validation_errors
    from worker.engine.orchestrator import run_benchmark
    from worker.engine.plan import RunConfig

    config = RunConfig(
        url=llm_url,
        suites=["speed", "toolcall"],
        tasks=["tc-01", "speed-p128-n256"],
        trials=1,
        harness="xml-tool-call",
        max_tokens=48,
        home=bench_home,
    )
    bundle = run_benchmark(config).bundle
    assert validation_errors(bundle) == []
    assert bundle["status"] == "complete"
    assert (bundle["harness"], bundle["harness_version"]) == ("xml-tool-call", "v1")
    assert bundle["settings"]["harness"] == "xml-tool-call"
    toolcall = bundle["suites"]["toolcall"]
    assert toolcall["task_count"] == 1
    assert all(t["execution_ok"] for t in toolcall["tasks"])
    assert isinstance(toolcall["metadata"]["harness_malformed_blocks"], int)
    # The harness never reaches the speed suite: no system prompt was added to its prompt.
    speed = bundle["suites"]["speed"]
    assert "harness_malformed_blocks" not in speed["metadata"]
    trial = speed["tasks"][0]["metadata"]["trials"][0]
    assert abs(trial["prompt_tokens_deviation"]) < 0.1
