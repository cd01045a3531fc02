"""mini-swe-agent, the real program, caged, against the real llama.cpp server."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from worker.engine.matrix.adapters import adapter
from worker.engine.matrix.runner import run_program
from worker.engine.matrix.spec import HarnessTask, Overhead
from worker.engine.matrix.testing import force_reply, log_offset, wait_for_server_log
from worker.tests.llm_server import require_harness

pytestmark = [
    pytest.mark.llm,
]
MINI = adapter("mini-swe-agent")
CALC = "def add(a, b):\n    return a - b\n"
# The golden run's cap: it only has to hold (a reply it cuts off is a format failure mini feeds
# back, which the test counts too); each decoded token is the slow part on a loaded CPU.
CAP = 16


@pytest.fixture
def installed() -> None:
    require_harness(MINI.spec)


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "calc.py").write_text(CALC)
    return workspace


def test_golden_overhead_matches_the_server_log_end_to_end(
    tmp_path,
    installed,
    llm_server,
    llm_model,
):
    task = HarnessTask("calc", "Fix add() in calc.py so 2+3 == 5.", ("calc.py",), max_steps=2)
    offset = log_offset(llm_server.log_path)
    result = run_program(
        MINI,
        task,
        _workspace(tmp_path),
        llm_server.base_url,
        llm_model,
        max_tokens_cap=CAP,
        timeout_s=420,
    )
    # It ran to its own end (the step limit, or a submission), not to our timeout.
    assert not result.timed_out and result.returncode == 0, result.stderr[-2000:]
    assert "Saved trajectory" in result.stdout
    records = result.requests
    assert 1 <= len(records) <= task.max_steps
    assert all(r.status == 200 and r.source == "timings" for r in records)
    logged = wait_for_server_log(llm_server.log_path, offset, len(records))
    overhead = Overhead.measure(records, result.wall_ms)
    assert overhead.requests == len(logged)
    assert overhead.prompt_tokens - overhead.cached_tokens == sum(
        e["prompt_tokens"] for e in logged
    )
    assert overhead.completion_tokens == sum(e["completion_tokens"] for e in logged)
    assert all(r.completion_tokens <= CAP for r in records)  # the cap held
    # mini's system prompt and instructions are the harness's cost: far beyond the task itself.
    assert records[0].prompt_tokens > 400
    assert 0 < overhead.model_ms < overhead.wall_ms
    # Its trajectory came back from HOME: each request is either an assistant turn it could read
    # or a reply it rejected (no single fenced action, or cut off by the cap), fed back as a
    # format error; each of those is one format failure.
    trajectory = json.loads(result.home_files["mini.traj.json"])
    turns = trajectory["messages"]
    rejected = [
        m
        for m in turns
        if m["role"] == "user"
        and m["content"].startswith(("Format error", "Your previous response reached"))
    ]
    assert sum(m["role"] == "assistant" for m in turns) + len(rejected) == len(records)
    failures = MINI.format_failures(result)
    assert len(failures) == len(rejected)
    assert all(
        f.startswith(("Expected exactly 1 action", "Your previous response")) for f in failures
    )


class _Listener:
    """A host loopback server that counts the connections it gets (the cage must give none)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def _by_step(replies: list[str]) -> Callable[[dict], dict]:
    """A proxy rewrite that forces reply i on the request after i assistant turns."""

    def rewrite(body: dict) -> dict:
        step = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        return force_reply(replies[min(step, len(replies) - 1)])(body)

    return rewrite


def test_sandbox_stops_the_network_and_writes_outside_the_workspace(
    tmp_path,
    installed,
    llm_server,
    llm_model,
):
    mark = uuid.uuid4().hex[:6]
    escapes = [Path(f"/etc/benchloop-escape-{mark}"), Path(f"/root/benchloop-escape-{mark}")]
    listener = _Listener()
    command = (  # short: every forced token costs a grammar-constrained sampling step
        f"curl -sS -m 5 http://example.com/; curl -sS -m 5 http://127.0.0.1:{listener.port}/; "
        f"echo x > {escapes[0]}; echo x > {escapes[1]}; echo x > inside.txt"
    )
    # The second step only has to end the run (its request carries the first step's output
    # back to the model): a short action, since every forced token is a sampling step.
    replies = [f"```mswea_bash_command\n{command}\n```", "```mswea_bash_command\nls\n```"]
    task = HarnessTask("escape", "Fetch http://example.com and save it.", (), max_steps=2)
    workspace = _workspace(tmp_path)
    try:
        result = run_program(
            MINI,
            task,
            workspace,
            llm_server.base_url,
            llm_model,
            max_tokens_cap=256,
            timeout_s=420,
            rewrite=_by_step(replies),
        )
    finally:
        listener.close()
    assert not result.timed_out, result.stderr[-2000:]
    assert len(result.requests) == 2 and all(r.status == 200 for r in result.requests)
    assert MINI.format_failures(result) == []  # each forced action parsed
    assert (workspace / "inside.txt").read_text() == "x\n"  # the action did run
    assert listener.accepted == 0  # no connection left the cage
    for path in escapes:
        assert not path.exists()
    text = "\n".join(result.denials)
    assert "network blocked: curl: (6) Could not resolve host: example.com" in text
    assert f"network blocked: curl: (7) Failed to connect to 127.0.0.1 port {listener.port}" in text
    assert f"write outside the workspace blocked: /bin/sh: 1: cannot create {escapes[0]}" in text
    assert str(escapes[1]) in text
    # The harness fed the kernel's answer back to the model, as the task's reason would read it.
    fed_back = [
        m["content"] for body in result.transcript for m in body["messages"] if m["role"] == "user"
    ]
    assert any("Read-only file system" in c for c in fed_back)
