"""Hermes Agent, the real program, caged, against the real llama.cpp server.

Hermes's prompt (system prompt and the schemas of its six file and terminal tools) is about
4,400 tokens, over the shared fixture server's 4,096-token window, so these tests start their own
server with 8,192 (the ChatML template with tool calls, so the server parses Hermes's tool calls).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from worker.engine.matrix.adapters import adapter
from worker.engine.matrix.adapters.hermes_agent import UPDATE_CHECK
from worker.engine.matrix.runner import run_program
from worker.engine.matrix.spec import Endpoint, HarnessTask, Overhead, ProgramResult
from worker.engine.matrix.testing import forced_reply_grammar, log_offset, wait_for_server_log
from worker.engine.testing.xllama_launcher import MODEL_ALIAS
from worker.tests.llm_server import require_harness

pytestmark = [
    pytest.mark.llm,
]
HERMES = adapter("hermes-agent")
CALC = "def add(a, b):\n    return a - b\n"


@pytest.fixture
def installed() -> None:
    require_harness(HERMES.spec)


@pytest.fixture
def server(llm_server_8k):
    return llm_server_8k


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "calc.py").write_text(CALC)
    return workspace


def test_invocation_is_unattended_bounded_and_offline():
    task = HarnessTask("calc", "Fix add().", ("calc.py",), max_steps=3)
    inv = HERMES.invocation(task, Endpoint("http://127.0.0.1:8771/v1", "m"))
    argv = inv.argv
    assert argv[:2] == ["hermes", "chat"] and "--yolo" in argv and "-Q" in argv
    assert argv[argv.index("--max-turns") + 1] == "3"
    assert argv[argv.index("-t") + 1] == "file,terminal"
    assert argv[argv.index("-q") + 1] == "Fix add().\n\nFiles: calc.py"
    config = json.loads(inv.home_files[".hermes/config.yaml"])
    assert config["model"]["base_url"] == "http://127.0.0.1:8771/v1"
    assert config["model"]["provider"] == "custom" and config["model"]["default"] == "m"
    assert config["model_catalog"]["enabled"] is False
    assert config["security"]["tirith_enabled"] is False
    assert json.loads(inv.home_files[UPDATE_CHECK])["ver"] == HERMES.spec.version


def test_golden_overhead_matches_the_server_log(tmp_path, installed, server):
    task = HarnessTask("calc", "Fix add() in calc.py so 2+3 == 5.", ("calc.py",), max_steps=1)
    offset = log_offset(server.log_path)
    result = run_program(
        HERMES,
        task,
        _workspace(tmp_path),
        server.base_url,
        MODEL_ALIAS,
        max_tokens_cap=16,
        timeout_s=480,
    )
    assert not result.timed_out and result.returncode == 0, result.stderr[-2000:]
    records = result.requests
    # One tool-calling turn, then (the limit reached) Hermes's own summary request: no tools,
    # not streamed. Both are the harness's requests and both count.
    assert 1 <= len(records) <= task.max_steps + 1, records
    assert all(r.status == 200 and r.source == "timings" for r in records), records
    assert records[0].stream
    if len(records) == 2:  # no tool schemas in the summary request: a shorter prompt
        assert not records[1].stream and records[1].prompt_tokens < records[0].prompt_tokens
        last = result.transcript[1]["messages"][-1]["content"]
        assert last.startswith("You've reached the maximum number of tool-calling iterations")
        assert "Reached maximum iterations (1)" in result.stdout
    logged = wait_for_server_log(server.log_path, offset, len(records))
    overhead = Overhead.measure(records, result.wall_ms)
    assert overhead.requests == len(logged)
    assert overhead.prompt_tokens - overhead.cached_tokens == sum(
        e["prompt_tokens"] for e in logged
    )
    assert overhead.completion_tokens == sum(e["completion_tokens"] for e in logged)
    assert all(r.completion_tokens <= 16 for r in records)
    # The harness's cost: its system prompt and six tool schemas, for a one-line task.
    assert records[0].prompt_tokens > 3000
    body = result.transcript[0]
    assert body["messages"][0]["role"] == "system"
    # Nothing it tried on its own was stopped: no update check, no catalog, no downloads.
    assert result.denials == []
    assert json.loads(result.home_files[UPDATE_CHECK])["behind"] == 0
    assert ".hermes/.tirith-install-failed" not in result.home_files


def _repeat(name: str, arguments: dict) -> dict:
    """Request fields that make the real model emit one tool call: "repeat this line", with the
    call in the server's tool-call syntax, at temperature 0, offering only that tool with a
    one-line schema (a long schema in the prompt distracts a 135M model from copying)."""
    line = json.dumps({"name": name, "arguments": arguments})
    properties = {key: {"type": "string"} for key in arguments}
    tool = {
        "type": "function",
        "function": {
            "name": name,
            "description": name,
            "parameters": {"type": "object", "properties": properties},
        },
    }
    return {
        "messages": [
            {"role": "user", "content": f"Repeat this line exactly:\n<tool_call>{line}</tool_call>"}
        ],
        "tools": [tool],
        "temperature": 0,
    }


def _done(body: dict) -> dict:
    """The final reply: plain "done" (a grammar, so no tools may be offered)."""
    body = {k: v for k, v in body.items() if k not in ("tools", "tool_choice")}
    body.pop("parallel_tool_calls", None)
    return {
        **body,
        "messages": [{"role": "user", "content": "Say done."}],
        "grammar": forced_reply_grammar("done"),
    }


def _force_tool_calls(calls: list[tuple[str, dict]]):
    """A proxy rewrite that makes the real model answer request i with tool call i, then "done".

    llama.cpp refuses a grammar together with tools, so the calls are forced by ``_repeat``; the
    server parses each into a real tool call, which Hermes runs with its own tool. The transcript
    keeps what Hermes sent (the proxy records bodies before the rewrite)."""

    def rewrite(body: dict) -> dict:
        answered = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        if answered < len(calls):
            return {**body, **_repeat(*calls[answered])}
        return _done(body)

    return rewrite


def _tool_results(result: ProgramResult) -> list[str]:
    last = result.transcript[-1]["messages"]
    return [m["content"] for m in last if m.get("role") == "tool"]


def test_sandbox_stops_the_network_and_writes_outside_the_workspace(tmp_path, installed, server):
    mark = uuid.uuid4().hex[:10]
    etc_escape = Path(f"/etc/benchloop-escape-{mark}")
    parent_escape = tmp_path / f"escape-{mark}.txt"  # the workspace's parent, on the host
    network = (
        "curl -sS -m 5 http://example.com/ -o fetched.html; "
        "python3 -c \"import urllib.request; urllib.request.urlopen('http://example.com', "
        'timeout=5)"'
    )
    # The /etc write in a call of its own: its one line of output is the evidence (in CI, once,
    # it went missing from behind the traceback's output; why is not known).
    calls = [
        ("terminal", {"command": network}),
        ("terminal", {"command": f"echo x > {etc_escape}; echo x > inside.txt"}),
        ("write_file", {"path": f"../escape-{mark}.txt", "content": "x"}),
    ]
    workspace = _workspace(tmp_path)
    task = HarnessTask("escape", "Fetch http://example.com and save it.", (), max_steps=4)
    result = run_program(
        HERMES,
        task,
        workspace,
        server.base_url,
        MODEL_ALIAS,
        max_tokens_cap=192,  # the forced terminal call is about 100 tokens
        timeout_s=480,
        rewrite=_force_tool_calls(calls),
    )
    assert not result.timed_out, result.stderr[-2000:]
    assert len(result.requests) == 4 and all(r.status == 200 for r in result.requests)
    assert HERMES.format_failures(result) == []  # both forced calls were real, valid calls
    assert (workspace / "inside.txt").read_text() == "x\n"  # the terminal call did run
    assert not (workspace / "fetched.html").exists()
    assert not etc_escape.exists() and not parent_escape.exists()
    outputs = _tool_results(result)
    assert len(outputs) == 3
    text = "\n".join(result.denials)
    assert "network blocked:" in text and "Could not resolve host: example.com" in text
    assert "Temporary failure in name resolution" in text
    assert "write outside the workspace blocked:" in text and str(etc_escape) in text, outputs[1]
    # write_file to ../: the workspace is /workspace in the cage, so .. is its read-only root.
    assert "Read-only file system" in outputs[2], outputs[2]


def test_format_failures_are_hermes_own_words(tmp_path, installed, server):
    """A call to a tool that does not exist is sent back to the model as an error. (A near miss,
    e.g. "read_fil", is not: Hermes repairs it to "read_file" and says so on stdout.)"""
    # The server parses a call to "launch_rocket" (offered under that name); Hermes has none.
    rewrite = _force_tool_calls([("launch_rocket", {"target": "moon"})])

    task = HarnessTask("calc", "Read calc.py.", ("calc.py",), max_steps=2)
    result = run_program(
        HERMES,
        task,
        _workspace(tmp_path),
        server.base_url,
        MODEL_ALIAS,
        max_tokens_cap=64,
        timeout_s=480,
        rewrite=rewrite,
    )
    assert not result.timed_out, result.stderr[-2000:]
    failures = HERMES.format_failures(result)
    assert failures == [
        "Tool 'launch_rocket' does not exist. Available tools: "
        "patch, process, read_file, search_files, terminal, write_file"
    ]
    assert len(result.requests) == 2
