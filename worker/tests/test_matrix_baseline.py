"""Our baseline loop: its overhead figures are the server's own, and its file tools stay inside the
workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.engine.matrix.baseline import Workspace, run_loop
from worker.engine.matrix.spec import HarnessTask, Overhead
from worker.engine.matrix.testing import log_offset, wait_for_server_log

TASK = HarnessTask("calc", "Fix add() in calc.py so that add(2, 3) == 5.", ("calc.py",), 3)
# The cap only has to hold; each decoded token is the slow part of a loaded CPU's run.
CAP = 16


def test_the_file_tools_refuse_every_path_outside_the_workspace(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("not yours")
    (root / "link").symlink_to(tmp_path / "secret.txt")
    tools = Workspace(root)
    for path in ("../secret.txt", "/etc/passwd", str(tmp_path / "secret.txt"), "link", ""):
        assert tools.call("read_file", {"path": path}).startswith("error:"), path
    assert tools.call("write_file", {"path": "../escape.py", "content": "x"}).startswith("error")
    assert not (tmp_path / "escape.py").exists()
    assert len(tools.denials) == 5 and "outside the workspace" in tools.denials[0]
    assert tools.call("write_file", {"path": "pkg/new.py", "content": "x = 1\n"}).startswith(
        "wrote"
    )
    assert tools.call("list_files", {}) == "link\npkg/new.py"
    assert tools.call("read_file", {"path": "pkg/new.py"}) == "x = 1\n"


@pytest.mark.llm
@pytest.mark.parametrize("harness", ["raw", "xml-tool-call"])
def test_the_baseline_overhead_matches_the_server_log(harness, tmp_path, llm_server, llm_model):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    offset = log_offset(llm_server.log_path)
    result, failures = run_loop(
        harness, TASK, workspace, llm_server.base_url, llm_model, max_tokens_cap=CAP, timeout_s=120
    )
    assert result.returncode == 0, result.stderr
    assert 1 <= len(result.requests) <= TASK.max_steps
    logged = wait_for_server_log(llm_server.log_path, offset, len(result.requests))
    overhead = Overhead.measure(result.requests, result.wall_ms, len(failures))
    assert overhead.requests == len(logged)
    assert overhead.prompt_tokens - overhead.cached_tokens == sum(
        e["prompt_tokens"] for e in logged
    )
    assert overhead.completion_tokens == sum(e["completion_tokens"] for e in logged)
    assert all((r.completion_tokens or 0) <= CAP for r in result.requests)
    assert 0 < overhead.model_ms <= overhead.wall_ms
