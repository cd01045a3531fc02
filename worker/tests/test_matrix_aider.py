"""Aider, the real program, caged, against the real llama.cpp server.

The model's replies are forced with a grammar (``force_reply``: Aider sends no tools, so the
server takes a grammar), which makes each run's path through Aider certain.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from worker.engine.matrix.adapters import adapter, variants
from worker.engine.matrix.adapters.aider import CHAT_HISTORY, FAILED, AiderAdapter
from worker.engine.matrix.runner import run_program
from worker.engine.matrix.spec import Endpoint, HarnessTask, Invocation, Overhead, ProgramResult
from worker.engine.matrix.testing import force_reply, log_offset, wait_for_server_log
from worker.engine.testing.xllama_launcher import MODEL_ALIAS
from worker.tests.llm_server import require_harness

pytestmark = [
    pytest.mark.llm,
]
CALC = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
# Code outside the chat: Aider's repository map summarises it.
SHAPES = "def rectangle_area(width, height):\n    return width * height\n"
TASK = HarnessTask("calc", "Fix add() in calc.py so add(2, 3) == 5.", ("calc.py",), max_steps=2)


@pytest.fixture
def installed() -> None:
    require_harness(adapter("aider").spec)


def _forced(program, task, workspace, server, reply: str, *, cap: int) -> ProgramResult:
    """``program`` on ``task``, caged, with every model reply forced to ``reply``."""
    return run_program(
        program,
        task,
        workspace,
        server.base_url,
        MODEL_ALIAS,
        max_tokens_cap=cap,
        timeout_s=480,
        rewrite=force_reply(reply),
    )


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "calc.py").write_text(CALC)
    (workspace / "shapes.py").write_text(SHAPES)
    return workspace


def test_variants_and_their_switches():
    diff = adapter("aider", "diff")
    assert isinstance(diff, AiderAdapter) and diff.edit_format == "diff"
    assert adapter("aider").variant == "whole" and adapter("aider", "whole").variant == "whole"
    assert set(variants("aider")) == {"whole", "diff"}
    with pytest.raises(ValueError):
        AiderAdapter(edit_format="udiff-simple")
    inv = adapter("aider", "diff").invocation(TASK, Endpoint("http://127.0.0.1:8771/v1", "m"))
    argv = inv.argv
    assert argv[:3] == ["python", "-I", "-c"] and argv[4] == "1"  # max_steps 2: 1 reflection
    flags = argv[5:]
    assert flags[flags.index("--model") + 1] == "openai/m"
    assert flags[flags.index("--edit-format") + 1] == "diff"
    assert flags[flags.index("--openai-api-base") + 1] == "http://127.0.0.1:8771/v1"
    for switch in ("--no-auto-commits", "--no-gitignore", "--no-analytics", "--no-detect-urls"):
        assert switch in flags
    assert "--no-git" not in flags  # a git repository, so Aider builds its repository map
    assert flags[-1] == "calc.py" and flags[-2] == TASK.prompt
    assert inv.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert "openai/m" in inv.home_files[".aider.model.metadata.json"]


def test_golden_overhead_and_format_failures(tmp_path, installed, llm_server, llm_model):
    """A SEARCH block that matches nothing: Aider says so, reflects once (max_steps 2), stops."""
    reply = (
        "calc.py\n```python\n<<<<<<< SEARCH\n    return a * b\n=======\n"
        "    return a + b\n>>>>>>> REPLACE\n```\n"
    )
    workspace = _workspace(tmp_path)
    offset = log_offset(llm_server.log_path)
    result = _forced(adapter("aider", "diff"), TASK, workspace, llm_server, reply, cap=96)
    assert not result.timed_out and result.returncode == 0, result.stdout[-2000:]
    records = result.requests
    assert len(records) == 2  # the first try and one reflection: the bound held
    assert all(r.status == 200 and r.source == "timings" for r in records)
    logged = wait_for_server_log(llm_server.log_path, offset, len(records))
    overhead = Overhead.measure(records, result.wall_ms)
    assert overhead.requests == len(logged) == 2
    assert overhead.prompt_tokens - overhead.cached_tokens == sum(
        e["prompt_tokens"] for e in logged
    )
    assert overhead.completion_tokens == sum(e["completion_tokens"] for e in logged)
    # Aider's system prompt (the SEARCH/REPLACE rules and examples) is its cost.
    assert records[0].prompt_tokens > 1500
    # The reflection carries Aider's error message back to the model.
    assert "SEARCH/REPLACE block failed to match" in str(result.transcript[-1]["messages"][-1])
    failures = adapter("aider", "diff").format_failures(result)
    assert failures == [f"{FAILED} # 1 SEARCH/REPLACE block failed to match!"] * 2
    assert "Only 1 reflections allowed, stopping." in result.stdout
    assert (workspace / "calc.py").read_text() == CALC
    assert CHAT_HISTORY in result.home_files  # its files went to HOME, not the workspace
    # The launcher's repository; the map's tag cache went to HOME.
    assert sorted(p.name for p in workspace.iterdir()) == [".git", "calc.py", "shapes.py"]
    assert result.denials == []  # it tried nothing the cage had to stop


def test_whole_file_edit_lands_in_the_workspace(tmp_path, installed, llm_server, llm_model):
    reply = f"calc.py\n```python\n{FIXED}```\n"
    workspace = _workspace(tmp_path)
    result = _forced(adapter("aider"), TASK, workspace, llm_server, reply, cap=64)
    assert not result.timed_out and result.returncode == 0, result.stdout[-2000:]
    assert (workspace / "calc.py").read_text() == FIXED
    assert len(result.requests) == 1
    assert adapter("aider").format_failures(result) == []
    assert "Applied edit to calc.py" in result.stdout
    # Aider ran in the launcher's repository (one commit of the task's files, the edit left
    # uncommitted) and sent its map of the code outside the chat: shapes.py, by its signature.
    assert "Git repo: .git with 2 files" in result.stdout
    assert "Update git name" not in result.stdout  # the repository has its own identity
    assert "Repo-map: using" in result.stdout
    sent = "\n".join(str(m.get("content")) for m in result.transcript[0]["messages"])
    assert "shapes.py" in sent and "def rectangle_area(width, height):" in sent
    assert "return width * height" not in sent  # a summary, not the file
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=workspace, capture_output=True, text=True
    )
    assert status.stdout.strip() == "M calc.py"


class _WithFlags(AiderAdapter):
    """The matrix's Aider with a few more of Aider's own flags (the later of two wins)."""

    def __init__(self, *flags: str) -> None:
        super().__init__()
        self.flags = list(flags)

    def invocation(self, task: HarnessTask, endpoint: Endpoint) -> Invocation:
        inv = super().invocation(task, endpoint)
        at = inv.argv.index("--message")
        inv.argv[at:at] = self.flags
        return inv


def _escape_reply(mark: str) -> str:
    return f"/etc/hostname\n```\nescaped\n```\n\n../escape-{mark}.py\n```\nx = 1\n```\n"


def test_aider_in_its_repository_refuses_an_edit_outside_it(
    tmp_path,
    installed,
    llm_server,
    llm_model,
):
    """As the matrix runs it (a git repository), Aider itself refuses a path outside the repo:
    a format failure in its own words, before the cage is reached."""
    host_hostname = Path("/etc/hostname").read_bytes()
    workspace = _workspace(tmp_path)
    task = HarnessTask("escape", "Edit the files.", ("calc.py",), max_steps=1)
    reply = _escape_reply(uuid.uuid4().hex[:8])
    result = _forced(adapter("aider"), task, workspace, llm_server, reply, cap=64)
    assert not result.timed_out, result.stdout[-2000:]
    assert Path("/etc/hostname").read_bytes() == host_hostname
    assert (workspace / "calc.py").read_text() == CALC
    assert "'/etc/hostname' is not in the subpath of '/workspace'" in result.stdout
    assert adapter("aider").format_failures(result) == [
        f"{FAILED} '/etc/hostname' is not in the subpath of '/workspace' OR one path is "
        "relative and the other is absolute."
    ]


def test_sandbox_stops_writes_outside_the_workspace(tmp_path, installed, llm_server, llm_model):
    """Without git Aider writes wherever an edit names: an existing file outside the workspace
    (the cage's /etc/hostname) fails with the kernel's words; a new one (../) fails silently in
    Aider."""
    mark = uuid.uuid4().hex[:8]
    host_hostname = Path("/etc/hostname").read_bytes()
    reply = _escape_reply(mark)
    workspace = _workspace(tmp_path)
    task = HarnessTask("escape", "Edit the files.", ("calc.py",), max_steps=1)
    # Outside a git repository nothing of Aider's own keeps an edit in the workspace: only the cage.
    result = _forced(_WithFlags("--no-git"), task, workspace, llm_server, reply, cap=64)
    assert not result.timed_out, result.stdout[-2000:]
    assert Path("/etc/hostname").read_bytes() == host_hostname
    assert not (tmp_path / f"escape-{mark}.py").exists()
    assert (workspace / "calc.py").read_text() == CALC
    text = "\n".join(result.denials)
    assert "write outside the workspace blocked:" in text
    assert "Unable to write file /etc/hostname" in text and "Read-only file system" in text
    # Aider swallows the reason when it cannot create a file; its own words are all there is.
    assert f"Unable to create ../escape-{mark}.py, skipping edits." in result.stdout


def test_sandbox_model_shell_commands_are_refused_by_aider(
    tmp_path,
    installed,
    llm_server,
    llm_model,
):
    """The only way an Aider model reaches a shell: a suggested command. --yes-always never runs
    one (Aider asks for an explicit yes), so nothing is fetched and nothing leaves the cage."""
    reply = "Fetch it:\n\n```bash\ncurl -sS http://example.com/ -o fetched.html\n```\n"
    workspace = _workspace(tmp_path)
    task = HarnessTask("net", "Fetch the example page.", ("calc.py",), max_steps=1)
    result = _forced(adapter("aider", "diff"), task, workspace, llm_server, reply, cap=48)
    assert not result.timed_out, result.stdout[-2000:]
    # The question is not printed under --yes-always; the chat history has it, answered "n".
    history = result.home_files[CHAT_HISTORY]
    assert "Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: n" in history
    assert "Running curl" not in result.stdout
    assert not (workspace / "fetched.html").exists()
    assert result.denials == []


def test_sandbox_stops_aiders_own_web_scraper(tmp_path, installed, llm_server, llm_model):
    task = HarnessTask(
        "net", "Read http://example.com/benchloop-probe and fix calc.py.", ("calc.py",), 1
    )
    scraping = _WithFlags("--detect-urls")  # URL scraping back on (Aider's own default)
    result = _forced(scraping, task, _workspace(tmp_path), llm_server, "ok", cap=16)
    assert not result.timed_out, result.stdout[-2000:]
    assert "Scraping http://example.com/benchloop-probe" in result.stdout
    text = "\n".join(result.denials)
    assert "network blocked: HTTP error occurred:" in text, result.stdout[-3000:]
    assert "Temporary failure in name resolution" in text
    assert "Failed to retrieve content from http://example.com/benchloop-probe" in result.stdout
